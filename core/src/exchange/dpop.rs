//! DPoP (RFC 9449): a per-client ES256 key pair, and the proof JWT it signs
//! for each HTTP request (token requests and MCP requests), with the
//! server-supplied nonces remembered per origin.
//!
//! ```text
//!  token request ─► DPoP: proof(htm, htu, iat, jti[, nonce]) ─► token_type DPoP (bound to the key)
//!  MCP request   ─► Authorization: DPoP <token>, DPoP: proof(… , ath = b64url(SHA-256(token)))
//!  400 use_dpop_nonce (AS) │ 401 DPoP error="use_dpop_nonce" (RS) + DPoP-Nonce ─► remember, retry once
//! ```
//!
//! The core has no clock: `iat` comes from a [`WallClock`] the driver
//! anchors once (an `Instant` and the Unix time at that instant), moved by
//! the `now` of each call. Signatures and ids use the operating system's
//! random source, as the PKCE verifier does. It sits in the exchange floor
//! because both the transport (MCP requests) and the authorization flow
//! (token requests) sign proofs. The crypto is `ring`'s (the
//! same crate rustls uses in the adapters): P-256 ECDSA with SHA-256 in the
//! fixed (JWS) signature format.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ring::rand::SystemRandom;
use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest, Sha256};

use super::HttpUrl;

/// Base64url without padding.
fn base64url(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// `scheme://host[:port]`, the port only when not the default.
fn origin_string(url: &HttpUrl) -> String {
    let (scheme, host, port) = url.origin();
    if port == scheme.default_port() {
        format!("{}://{}", scheme.as_str(), host)
    } else {
        format!("{}://{}:{}", scheme.as_str(), host, port)
    }
}

/// Unix time for a sans-IO machine: the Unix time at one `Instant`, from
/// which the `now` of each call counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WallClock {
    at: Instant,
    unix: Duration,
}

impl WallClock {
    /// `at` was `unix` (a `SystemTime`) on the wall clock. A driver reads
    /// both clocks once: `WallClock::anchor(Instant::now(), SystemTime::now())`.
    pub fn anchor(at: Instant, unix: SystemTime) -> WallClock {
        WallClock {
            at,
            unix: unix.duration_since(UNIX_EPOCH).unwrap_or_default(),
        }
    }

    /// Seconds since the Unix epoch at `now`.
    pub fn unix_secs(&self, now: Instant) -> u64 {
        let t = match now.checked_duration_since(self.at) {
            Some(d) => self.unix.saturating_add(d),
            None => self.unix.saturating_sub(self.at.duration_since(now)),
        };
        t.as_secs()
    }
}

/// Why a DPoP key could not be made or read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DpopError {
    /// No random numbers (the key or a proof cannot be made).
    #[error("DPoP: no random numbers")]
    Random,
    /// A stored key is not a P-256 PKCS#8 document.
    #[error("DPoP: unusable stored key: {0}")]
    Key(String),
}

/// A DPoP key pair (ES256), and the nonces servers gave for it. Clones
/// share the key and the nonces. Stored (in an
/// [`AuthState`](crate::auth::AuthState)) as base64url PKCS#8, so that refreshed
/// tokens stay bound to it.
#[derive(Clone)]
pub struct DpopKey {
    inner: Arc<Inner>,
}

struct Inner {
    pkcs8: Vec<u8>,
    pair: EcdsaKeyPair,
    /// The JWK of the public key (RFC 7517), for the proofs' header.
    jwk: String,
    /// `DPoP-Nonce` by origin (`scheme://host[:port]`).
    nonces: Mutex<BTreeMap<String, String>>,
}

/// The parts of one HTTP request a proof covers.
#[derive(Debug, Clone, Copy)]
pub struct ProofRequest<'a> {
    /// `htm`: the method.
    pub method: &'a str,
    /// `htu` is made from it: without query or fragment.
    pub url: &'a HttpUrl,
    /// `ath`: the access token presented with it (resource requests).
    pub access_token: Option<&'a str>,
}

impl DpopKey {
    /// A fresh key pair.
    pub fn generate() -> Result<DpopKey, DpopError> {
        let rng = SystemRandom::new();
        let doc = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .map_err(|_| DpopError::Random)?;
        DpopKey::from_pkcs8(doc.as_ref())
    }

    /// The key in a PKCS#8 (v1 or v2) document.
    pub fn from_pkcs8(pkcs8: &[u8]) -> Result<DpopKey, DpopError> {
        let rng = SystemRandom::new();
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8, &rng)
            .map_err(|e| DpopError::Key(e.to_string()))?;
        let point = pair.public_key().as_ref();
        // An uncompressed P-256 point: 0x04, x (32 bytes), y (32 bytes).
        if point.len() != 65 || point[0] != 4 {
            return Err(DpopError::Key("not an uncompressed P-256 point".into()));
        }
        let jwk = format!(
            r#"{{"crv":"P-256","kty":"EC","x":"{}","y":"{}"}}"#,
            base64url(&point[1..33]),
            base64url(&point[33..])
        );
        Ok(DpopKey {
            inner: Arc::new(Inner {
                pkcs8: pkcs8.to_vec(),
                pair,
                jwk,
                nonces: Mutex::new(BTreeMap::new()),
            }),
        })
    }

    /// The public key as a JWK (members in the RFC 7638 thumbprint order).
    pub fn jwk(&self) -> &str {
        &self.inner.jwk
    }

    /// The RFC 7638 JWK thumbprint (SHA-256, base64url): the `jkt` a bound
    /// token names.
    pub fn thumbprint(&self) -> String {
        base64url(&Sha256::digest(self.inner.jwk.as_bytes()))
    }

    /// The nonce last given by `url`'s origin, if any.
    pub fn nonce_for(&self, url: &HttpUrl) -> Option<String> {
        self.nonces().get(&origin_string(url)).cloned()
    }

    /// Remembers the `DPoP-Nonce` that `url`'s origin gave; returns
    /// whether it is new (another than the one remembered).
    pub fn remember_nonce(&self, url: &HttpUrl, nonce: &str) -> bool {
        if nonce.is_empty() || !nonce.bytes().all(|b| (0x21..0x7f).contains(&b)) {
            return false;
        }
        let old = self.nonces().insert(origin_string(url), nonce.to_owned());
        old.as_deref() != Some(nonce)
    }

    fn nonces(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, String>> {
        self.inner.nonces.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A proof for `request` at Unix time `iat`, with the nonce remembered
    /// for its origin.
    pub fn proof(&self, request: ProofRequest<'_>, iat: u64) -> Result<String, DpopError> {
        let mut jti = [0u8; 16];
        getrandom::fill(&mut jti).map_err(|_| DpopError::Random)?;
        let htu = format!(
            "{}{}",
            origin_string(request.url),
            request.url.path().split('#').next().unwrap_or_default()
        );
        let mut claims = serde_json::json!({
            "jti": base64url(&jti),
            "htm": request.method,
            "htu": htu,
            "iat": iat,
        });
        if let Some(token) = request.access_token {
            claims["ath"] = base64url(&Sha256::digest(token.as_bytes())).into();
        }
        if let Some(nonce) = self.nonce_for(request.url) {
            claims["nonce"] = nonce.into();
        }
        let header = format!(
            r#"{{"typ":"dpop+jwt","alg":"ES256","jwk":{}}}"#,
            self.inner.jwk
        );
        let input = format!(
            "{}.{}",
            base64url(header.as_bytes()),
            base64url(claims.to_string().as_bytes())
        );
        let sig = self
            .inner
            .pair
            .sign(&SystemRandom::new(), input.as_bytes())
            .map_err(|_| DpopError::Random)?;
        Ok(format!("{input}.{}", base64url(sig.as_ref())))
    }
}

impl PartialEq for DpopKey {
    fn eq(&self, other: &Self) -> bool {
        self.inner.pkcs8 == other.inner.pkcs8
    }
}

impl Eq for DpopKey {}

impl fmt::Debug for DpopKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DpopKey")
            .field("thumbprint", &self.thumbprint())
            .finish_non_exhaustive()
    }
}

impl Serialize for DpopKey {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64url(&self.inner.pkcs8))
    }
}

impl<'de> Deserialize<'de> for DpopKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use base64::Engine as _;
        let s = String::deserialize(d)?;
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(s.trim_end_matches('='))
            .map_err(serde::de::Error::custom)?;
        DpopKey::from_pkcs8(&bytes).map_err(serde::de::Error::custom)
    }
}

/// What a transport needs to send a DPoP-bound token: the key, the clock
/// its proofs are dated by, and the token (for `ath`).
#[derive(Clone)]
pub struct DpopBinding {
    /// The key the token is bound to.
    pub key: DpopKey,
    /// Dates the proofs.
    pub clock: WallClock,
    /// The access token.
    pub access_token: String,
}

impl fmt::Debug for DpopBinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DpopBinding")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

/// Whether a resource server's answer asks for a DPoP nonce (RFC 9449
/// §9): 401 with a `DPoP` challenge whose `error` is `use_dpop_nonce`.
pub fn wants_nonce(status: u16, challenges: &[super::challenge::Challenge]) -> bool {
    status == 401
        && challenges.iter().any(|c| {
            c.scheme.eq_ignore_ascii_case("dpop") && c.param("error") == Some("use_dpop_nonce")
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;
    use ring::signature::{UnparsedPublicKey, ECDSA_P256_SHA256_FIXED};

    fn decode(part: &str) -> Vec<u8> {
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(part)
            .unwrap()
    }

    #[test]
    fn proof_verifies_with_its_jwk_and_says_what_it_covers() {
        let key = DpopKey::generate().unwrap();
        let url = HttpUrl::parse("http://127.0.0.1:8080/mcp?x=1").unwrap();
        key.remember_nonce(&url, "n-1");
        let proof = key
            .proof(
                ProofRequest {
                    method: "POST",
                    url: &url,
                    access_token: Some("tok"),
                },
                1_700_000_000,
            )
            .unwrap();
        let parts: Vec<&str> = proof.split('.').collect();
        assert_eq!(parts.len(), 3);
        let header: serde_json::Value = serde_json::from_slice(&decode(parts[0])).unwrap();
        assert_eq!(header["typ"], "dpop+jwt");
        assert_eq!(header["alg"], "ES256");
        assert!(header["jwk"].get("d").is_none());
        let claims: serde_json::Value = serde_json::from_slice(&decode(parts[1])).unwrap();
        assert_eq!(claims["htm"], "POST");
        assert_eq!(claims["htu"], "http://127.0.0.1:8080/mcp");
        assert_eq!(claims["iat"], 1_700_000_000);
        assert_eq!(claims["nonce"], "n-1");
        assert_eq!(
            claims["ath"],
            base64url(&Sha256::digest(b"tok")).as_str(),
            "ath is the token's hash"
        );
        // The signature verifies with the public key of the header.
        let x = decode(header["jwk"]["x"].as_str().unwrap());
        let y = decode(header["jwk"]["y"].as_str().unwrap());
        let mut point = vec![4u8];
        point.extend(x);
        point.extend(y);
        let signed = format!("{}.{}", parts[0], parts[1]);
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, &point)
            .verify(signed.as_bytes(), &decode(parts[2]))
            .expect("a valid ES256 signature");
        // Each proof is fresh.
        let again = key
            .proof(
                ProofRequest {
                    method: "POST",
                    url: &url,
                    access_token: None,
                },
                1_700_000_000,
            )
            .unwrap();
        let claims2: serde_json::Value =
            serde_json::from_slice(&decode(again.split('.').nth(1).unwrap())).unwrap();
        assert_ne!(claims["jti"], claims2["jti"]);
        assert!(claims2.get("ath").is_none());
    }

    #[test]
    fn key_round_trips_through_the_store_format() {
        let key = DpopKey::generate().unwrap();
        let json = serde_json::to_string(&key).unwrap();
        let back: DpopKey = serde_json::from_str(&json).unwrap();
        assert_eq!(back, key);
        assert_eq!(back.thumbprint(), key.thumbprint());
        assert!(!format!("{key:?}").contains(&json[1..json.len() - 1]));
        assert!(serde_json::from_str::<DpopKey>("\"AAAA\"").is_err());
        assert!(serde_json::from_str::<DpopKey>("\"%%\"").is_err());
    }

    #[test]
    fn thumbprint_matches_rfc7638_for_a_known_jwk() {
        // The thumbprint is SHA-256 over the canonical JWK: check the
        // member order and spacing against a hand-built canonical form.
        let key = DpopKey::generate().unwrap();
        let v: serde_json::Value = serde_json::from_str(key.jwk()).unwrap();
        let canonical = format!(
            r#"{{"crv":"{}","kty":"{}","x":"{}","y":"{}"}}"#,
            v["crv"].as_str().unwrap(),
            v["kty"].as_str().unwrap(),
            v["x"].as_str().unwrap(),
            v["y"].as_str().unwrap()
        );
        assert_eq!(
            key.thumbprint(),
            base64url(&Sha256::digest(canonical.as_bytes()))
        );
    }

    #[test]
    fn nonces_are_per_origin_and_checked() {
        let key = DpopKey::generate().unwrap();
        let a = HttpUrl::parse("https://as.example/token").unwrap();
        let a2 = HttpUrl::parse("https://as.example/other").unwrap();
        let b = HttpUrl::parse("https://rs.example/mcp").unwrap();
        assert!(key.remember_nonce(&a, "n1"));
        assert!(!key.remember_nonce(&a2, "n1"), "same origin, same nonce");
        assert_eq!(key.nonce_for(&b), None);
        assert!(!key.remember_nonce(&b, "bad nonce"), "not a header token");
        assert!(!key.remember_nonce(&b, ""));
        assert_eq!(key.nonce_for(&a2).as_deref(), Some("n1"));
    }

    #[test]
    fn wall_clock_follows_the_instant() {
        let t0 = Instant::now();
        let c = WallClock::anchor(t0, UNIX_EPOCH + Duration::from_secs(1000));
        assert_eq!(c.unix_secs(t0), 1000);
        assert_eq!(c.unix_secs(t0 + Duration::from_secs(5)), 1005);
        if let Some(before) = t0.checked_sub(Duration::from_secs(3)) {
            assert_eq!(c.unix_secs(before), 997);
        }
    }
}
