#!/usr/bin/env bash
# jsonwebtoken's two signature backends side by side (issue 15): `aws_lc_rs` (what the workspace
# uses) against `rust_crypto`, verifying one HS256, RS256 and ES256 token again and again on one
# thread, after a warm-up. Builds a throwaway crate in a temporary folder (outside the workspace,
# because jsonwebtoken with both backends compiled in must be told which one to use, and the
# workspace must never have both), runs it once per backend, prints one line per algorithm.
# Needs a C compiler (aws-lc-sys) and openssl; about 4 minutes the first time.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d /tmp/lingonews-jwt-backends.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src"
version=$(sed -n '/^name = "jsonwebtoken"$/{n;s/^version = "\(.*\)"$/\1/p}' "$root/Cargo.lock")

cat >"$work/Cargo.toml" <<EOF
[package]
name = "jwt-backends"
version = "0.1.0"
edition = "2024"

[dependencies]
jsonwebtoken = { version = "=$version", features = ["rust_crypto", "aws_lc_rs"] }
serde = { version = "1", features = ["derive"] }

[workspace]
EOF

cat >"$work/src/main.rs" <<'EOF'
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation, decode, encode};
use serde::{Deserialize, Serialize};
use std::time::Instant;

#[derive(Serialize, Deserialize)]
struct Claims { sub: String, iss: String, aud: String, exp: u64 }

fn main() {
    let provider = std::env::args().nth(1).unwrap();
    let dir = std::env::args().nth(2).unwrap();
    match provider.as_str() {
        "aws" => jsonwebtoken::crypto::aws_lc::DEFAULT_PROVIDER.install_default().unwrap(),
        _ => jsonwebtoken::crypto::rust_crypto::DEFAULT_PROVIDER.install_default().unwrap(),
    }
    let claims = Claims { sub: "bench-learner-1".into(), iss: "lingo-news-dev".into(), aud: "lingo-news".into(), exp: 4_000_000_000 };
    let rs_priv = std::fs::read(format!("{dir}/rs.pem")).unwrap();
    let rs_pub = std::fs::read(format!("{dir}/rs.pub.pem")).unwrap();
    let es_priv = std::fs::read(format!("{dir}/es.pem")).unwrap();
    let es_pub = std::fs::read(format!("{dir}/es.pub.pem")).unwrap();
    let cases: Vec<(Algorithm, EncodingKey, DecodingKey, u32)> = vec![
        (Algorithm::HS256, EncodingKey::from_secret(b"0123456789abcdef0123456789abcdef"), DecodingKey::from_secret(b"0123456789abcdef0123456789abcdef"), 200_000),
        (Algorithm::RS256, EncodingKey::from_rsa_pem(&rs_priv).unwrap(), DecodingKey::from_rsa_pem(&rs_pub).unwrap(), 20_000),
        (Algorithm::ES256, EncodingKey::from_ec_pem(&es_priv).unwrap(), DecodingKey::from_ec_pem(&es_pub).unwrap(), 10_000),
    ];
    for (alg, ek, dk, n) in cases {
        let token = encode(&Header::new(alg), &claims, &ek).unwrap();
        let mut v = Validation::new(alg);
        v.set_issuer(&["lingo-news-dev"]);
        v.set_audience(&["lingo-news"]);
        for _ in 0..n / 10 { decode::<Claims>(&token, &dk, &v).unwrap(); }
        let t = Instant::now();
        for _ in 0..n { decode::<Claims>(&token, &dk, &v).unwrap(); }
        let per = t.elapsed().as_secs_f64() / n as f64;
        println!("{provider}\t{alg:?}\t{:.2} us/verify\t{:.0} verifies/s", per * 1e6, 1.0 / per);
    }
}
EOF

cd "$work"
openssl genrsa -out rs.pem 2048 2>/dev/null
openssl rsa -in rs.pem -pubout -out rs.pub.pem 2>/dev/null
openssl ecparam -name prime256v1 -genkey -noout -out es.sec1.pem
openssl pkcs8 -topk8 -nocrypt -in es.sec1.pem -out es.pem
openssl ec -in es.pem -pubout -out es.pub.pem 2>/dev/null
CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/lingonews-jwt-backends}" cargo build --quiet --release
bin="${CARGO_TARGET_DIR:-$HOME/.cache/lingonews-jwt-backends}/release/jwt-backends"
for backend in rust aws; do "$bin" "$backend" "$work"; done
