//! `mint-token`: a development command that signs a token the binaries will accept, reading the
//! same key configuration they read.

use std::path::PathBuf;

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::json;

use crate::auth::verify::AuthConfig;

#[derive(clap::Args, Clone)]
pub struct MintArgs {
    #[command(flatten)]
    pub auth: AuthConfig,
    /// The caller id to put in `sub`.
    #[arg(long, default_value = "demo-learner")]
    pub sub: String,
    /// Space-separated scopes, e.g. "lingo:analytics".
    #[arg(long)]
    pub scope: Option<String>,
    /// Lifetime of the token in seconds.
    #[arg(long, default_value_t = 3600)]
    pub ttl_secs: u64,
    /// Algorithm to sign with; the first of AUTH_ALGORITHMS when absent.
    #[arg(long)]
    pub alg: Option<String>,
    /// PEM private key for RS256 / ES256 / EdDSA (HS256 signs with AUTH_HS256_SECRET).
    #[arg(long, env = "AUTH_SIGNING_KEY_FILE")]
    pub private_key_file: Option<PathBuf>,
    /// `kid` to put in the header (must name a key of the JWKS).
    #[arg(long)]
    pub kid: Option<String>,
}

pub fn mint(args: &MintArgs) -> anyhow::Result<String> {
    let alg_name = args
        .alg
        .clone()
        .or_else(|| args.auth.auth_algorithms.first().cloned())
        .unwrap_or_else(|| "HS256".into());
    let (alg, key) = match alg_name.as_str() {
        "HS256" => {
            let secret = args
                .auth
                .auth_hs256_secret
                .as_deref()
                .ok_or_else(|| anyhow::anyhow!("AUTH_HS256_SECRET is not set"))?;
            (
                Algorithm::HS256,
                EncodingKey::from_secret(secret.as_bytes()),
            )
        }
        other => {
            let path = args
                .private_key_file
                .as_ref()
                .ok_or_else(|| anyhow::anyhow!("{other} needs --private-key-file"))?;
            let pem = std::fs::read(path)?;
            match other {
                "RS256" => (Algorithm::RS256, EncodingKey::from_rsa_pem(&pem)?),
                "ES256" => (Algorithm::ES256, EncodingKey::from_ec_pem(&pem)?),
                "EdDSA" => (Algorithm::EdDSA, EncodingKey::from_ed_pem(&pem)?),
                _ => anyhow::bail!("unknown algorithm {other}"),
            }
        }
    };
    let now = jsonwebtoken::get_current_timestamp();
    let mut claims = json!({
        "sub": args.sub,
        "iss": args.auth.auth_issuer,
        "aud": args.auth.auth_audience,
        "iat": now,
        "exp": now + args.ttl_secs,
    });
    if let Some(scope) = &args.scope {
        claims["scope"] = json!(scope);
    }
    let mut header = Header::new(alg);
    header.kid = args.kid.clone();
    Ok(jsonwebtoken::encode(&header, &claims, &key)?)
}
