#!/usr/bin/env bash
# Prints, as YAML, every Secret the manifests in this directory reference, with fresh random
# passwords. Nothing secret is committed; create them once per environment:
#
#   deploy/k8s/make-secrets.sh | kubectl create -f -
#
# `kubectl create`, not `apply`: running it again never replaces a password in use (existing
# Secrets are refused with AlreadyExists and left alone; missing ones are created). For GitOps,
# pipe the output into your secret tooling (sealed-secrets, SOPS, ...) instead.
#
#   pg-role-<role>     kubernetes.io/basic-auth, one per database role: CloudNativePG sets the
#                      role's password from it (spec.managed.roles in 20-postgres.yaml)
#   lingo-db, news-db  the services' database URLs built from the same passwords:
#                      app-url (primary), read-url (news only: the read replicas), owner-url
#                      (migrations), pipeline-url (seeding and imports)
#   lingonews-jwt      hs256-secret: the HS256 token key, for the dev overlay only (DEV_HS256=1);
#                      production verifies the identity provider's keys (AUTH_JWKS_URL)
#   lingonews-backup-s3  ACCESS_KEY_ID, ACCESS_SECRET_KEY: the object-storage credentials of the
#                      backups (ObjectStore lingonews-backups in base/25-backups.yaml), from
#                      BACKUP_ACCESS_KEY_ID / BACKUP_SECRET_ACCESS_KEY; placeholders when unset
#
# Not generated: gateway-tls, the Gateway's certificate (cert-manager or your CA), and
# <PG_CLUSTER>-ca, the database CA that CloudNativePG creates and the pods mount.
#
# The database URLs verify the server: sslmode=verify-full against the CloudNativePG CA, mounted
# at /etc/lingonews/pg-ca/ca.crt in every pod that connects (the host names <cluster>-rw/-ro.<ns>.svc
# are in the operator's server certificate).
#
# Settings (environment): NAMESPACE (lingonews), PG_CLUSTER (lingonews-pg; a restored cluster's
# name when switching to it, deploy/README.md "Backups and restore"), DEV_HS256=1 (also write
# lingonews-jwt, for the dev overlay), AUTH_HS256_SECRET (with DEV_HS256=1: reuse an existing key
# instead of a random one), BACKUP_ACCESS_KEY_ID, BACKUP_SECRET_ACCESS_KEY.
set -euo pipefail

namespace=${NAMESPACE:-lingonews}
cluster=${PG_CLUSTER:-lingonews-pg}
database=lingonews
# Where the pods mount the CA (base/*.yaml, volume pg-ca); verify-full checks chain and host name.
params="sslmode=verify-full&sslrootcert=/etc/lingonews/pg-ca/ca.crt"

# 32 random bytes, URL-safe base64 without padding: safe inside a URL and a YAML string.
random_token() { head -c 32 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n'; }

secret_header() { # name type
  cat <<EOF
---
apiVersion: v1
kind: Secret
metadata:
  name: $1
  namespace: $namespace
  labels:
    app.kubernetes.io/part-of: lingonews
type: $2
stringData:
EOF
}

declare -A password
for role in lingo_owner lingo_app lingo_pipeline news_owner news_app news_pipeline; do
  password[$role]=$(random_token)
  secret_header "pg-role-${role//_/-}" kubernetes.io/basic-auth
  printf '  username: "%s"\n  password: "%s"\n' "$role" "${password[$role]}"
done

url() { # role service-suffix
  printf 'postgres://%s:%s@%s-%s.%s.svc:5432/%s?%s' \
    "$1" "${password[$1]}" "$cluster" "$2" "$namespace" "$database" "$params"
}

secret_header lingo-db Opaque
printf '  app-url: "%s"\n' "$(url lingo_app rw)"
printf '  owner-url: "%s"\n' "$(url lingo_owner rw)"
printf '  pipeline-url: "%s"\n' "$(url lingo_pipeline rw)"

secret_header news-db Opaque
printf '  app-url: "%s"\n' "$(url news_app rw)"
printf '  read-url: "%s"\n' "$(url news_app ro)"
printf '  owner-url: "%s"\n' "$(url news_owner rw)"
printf '  pipeline-url: "%s"\n' "$(url news_pipeline rw)"

if [ "${DEV_HS256:-0}" = 1 ]; then
  secret_header lingonews-jwt Opaque
  printf '  hs256-secret: "%s"\n' "${AUTH_HS256_SECRET:-$(random_token)}"
fi

if [ -z "${BACKUP_ACCESS_KEY_ID:-}" ] || [ -z "${BACKUP_SECRET_ACCESS_KEY:-}" ]; then
  echo "make-secrets: BACKUP_ACCESS_KEY_ID/BACKUP_SECRET_ACCESS_KEY unset: lingonews-backup-s3 gets" \
       "placeholders and backups fail until you replace them" >&2
fi
secret_header lingonews-backup-s3 Opaque
printf '  ACCESS_KEY_ID: "%s"\n' "${BACKUP_ACCESS_KEY_ID:-REPLACE-ME}"
printf '  ACCESS_SECRET_KEY: "%s"\n' "${BACKUP_SECRET_ACCESS_KEY:-REPLACE-ME}"
