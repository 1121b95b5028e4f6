//! Certificates made at test time with rcgen, written to a fresh folder
//! (removed on drop): a private CA, a server certificate it signed for
//! [`SERVER_NAMES`], an expired one, client certificates with EC keys
//! (PKCS#8 and SEC1 PEM) and an RSA key (PKCS#1 PEM), and a CA nobody
//! trusts.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use base64::Engine as _;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// The names the server certificate is valid for. `mcp.test` is in a
/// reserved top-level domain: only the test proxy's `--map` resolves it.
pub const SERVER_NAMES: &[&str] = &["mcp.test", "localhost", "127.0.0.1"];

/// A name the test proxy may map that the server certificate does not
/// cover (a name mismatch).
pub const OTHER_NAME: &str = "other.test";

/// A 2048-bit RSA key for the RSA client certificate (rcgen's ring backend
/// cannot make RSA keys). Made with `openssl genpkey` for these tests
/// only: it protects nothing.
const RSA_KEY_PKCS8: &str = "-----BEGIN PRIVATE KEY-----
MIIEvAIBADANBgkqhkiG9w0BAQEFAASCBKYwggSiAgEAAoIBAQDQxVyWseXmvu6I
VcmycK7t8J9VAWZ1RwP+5oZa4F5NBSWt03sGXFBMl6AShaoMXycvquYAOltyijY9
cAYZXVcBaZFC3wgaCm6STJ/+ZK4n7G7mgUp0qWKzLJf99z2V//rwo8LSeM0C/Ldn
U00Kn5iOKFLcF4oszRB9XJfJuWeo9QrfFDpDhaDsRWDFbp4CJvU28E9GI7TaxJJx
01asNs95ES/hBW1p+GNxL/B0JNingqF8RHcggSbK9PP+y7HIN8hP9PNjRwurGlW+
rD0rHVQmdC2Cm2mXMJ6AK4+AK8LExVkDOvKA01+n/ltEigUCi+vHDXtyX6VLv4AV
OxopZXnHAgMBAAECggEABqunr7DzdZH4MSb8kNUE4dlkXeTzjx+7wvM+q7yrhq55
a7psHeHpNulJVg4rRsXrjJxbSPqUXW6JGSFxMHJJC2SCHa7epWZb7hTAr/Irll75
lCfhZyTaYHs2SAkUUKyjKfkximQNuOC2Q3jn50T+LNyg+SNPaOsMcdT5jJp982oC
INIQRn0LHV1n5i0z3ZhgC8FNuCFNlwqQSUVEah7txCHEx0pU/ZtUm/5O0dn/7mMl
9bEqYjTS5z/4yQNuQ4zGi1Y5OgJSOm4urkuUu6ZrGR3xiKOfmwK09MVZAlPFeW5G
wPP3ehONHbEyxtRoW1tq84h5Scvbt9osI1OgSlascQKBgQD8BWpde9dZCuZc4jqR
MhcRoU7om60cTUu7+xpMYl8l0j0Fg5HeWWdmzMmzHB3PyODtFLhpZnpmO+Mebhq6
W5H6tJsEJZQEtG4fSx4kkVu+yNE+kjUoyCTmRrFqLaprdp1mwlFyfvpN5c0R0ich
Qs8PWjDxxNAYhXLVcVTGFkLeSwKBgQDUESS3TYKP9digLeNbcmLSNV+xT2GaONp6
jInjfIkwfZBTUBy5X0I6ldx7be7a2tUCTMIUplFvnh9HJBpwF26IZbXM+z+XIafr
ktHxksTqRFMk53SmM760IbkC4uoDx/OZWMksIrsX9rktFJhKtzUfD0j/vgwQWvlK
XYKdrQ609QKBgAQYbm8QeSJoS/AMeRks8DUIIwkipoCEPQvT+8xr+NHbhcRWLAOp
/kUsZMa1WUKsKAOSR6Dm2mxY4sr2zRZkMI4baz15AtvEttlpVhcQCaajCstygsyj
2/2l/nIUReWzKsGlvL8Ykya66kc03A/tTwIX3B3BrgQH/yK60b7aU8HbAoGAUwc/
Q9FCDBEqNlShDn2zeS/Sfn5g7VvTFmYN2pY4tFaE+kmEZYOJT5y7DUxWVzOUcGkT
F7iia7wR7O2SuE5ERXzk+BNqq0ZPE2mRby6SkFId53YDcssRoD8Py7SCAOb5VhGv
+erDK7e6eo70rVQbpUR7xT1oRcMIlXgVGpzWBD0CgYBJxjRXNw6dC61fDH55E5D/
4U17ax56Vfsms9f8NCaDhXWozFuOw7zpShDWcd8b3s87ed3zIXhQMSFSUcjVaXdA
x1a710Rhlq082TiqRfid0BAe9ycsb8HxLa9/SgEJWmR1n+1jxFKpnMjreBNIVC94
hugM75MsSnan5oX1guf0GQ==
-----END PRIVATE KEY-----
";

/// The files of one test PKI.
#[derive(Debug)]
pub struct Pki {
    dir: PathBuf,
    /// The CA certificate (PEM).
    pub ca: PathBuf,
    /// The server's certificate chain for [`SERVER_NAMES`], and its key.
    pub server_cert: PathBuf,
    /// See `server_cert`.
    pub server_key: PathBuf,
    /// A server certificate that expired in 2020, and its key.
    pub expired_cert: PathBuf,
    /// See `expired_cert`.
    pub expired_key: PathBuf,
    /// A client certificate (EC P-256), and its key as PKCS#8 PEM.
    pub client_cert: PathBuf,
    /// See `client_cert`.
    pub client_key: PathBuf,
    /// The same client key as SEC1 PEM (`EC PRIVATE KEY`).
    pub client_key_sec1: PathBuf,
    /// A client certificate with an RSA key, and its key as PKCS#1 PEM
    /// (`RSA PRIVATE KEY`).
    pub client_rsa_cert: PathBuf,
    /// See `client_rsa_cert`.
    pub client_rsa_key: PathBuf,
    /// A CA that signed none of these.
    pub stranger_ca: PathBuf,
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Pki {
    /// Makes a new PKI in a fresh folder.
    pub fn new() -> Pki {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "mcpwire-pki-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("pki folder");
        let write = |name: &str, text: &str| -> PathBuf {
            let path = dir.join(name);
            std::fs::write(&path, text).expect("pki file");
            path
        };

        let (ca_params, ca_key) = ca("mcpwire test CA");
        let ca_cert = ca_params.self_signed(&ca_key).expect("CA certificate");
        let issuer = Issuer::new(ca_params, ca_key);

        let server_key = KeyPair::generate().expect("key");
        let server = leaf(SERVER_NAMES, ExtendedKeyUsagePurpose::ServerAuth)
            .signed_by(&server_key, &issuer)
            .expect("server certificate");

        let expired_key = KeyPair::generate().expect("key");
        let mut expired_params = leaf(SERVER_NAMES, ExtendedKeyUsagePurpose::ServerAuth);
        expired_params.not_before = rcgen::date_time_ymd(2019, 1, 1);
        expired_params.not_after = rcgen::date_time_ymd(2020, 1, 1);
        let expired = expired_params
            .signed_by(&expired_key, &issuer)
            .expect("expired certificate");

        let client_key = KeyPair::generate().expect("key");
        let client = leaf(&["client.test"], ExtendedKeyUsagePurpose::ClientAuth)
            .signed_by(&client_key, &issuer)
            .expect("client certificate");

        let rsa_key = KeyPair::from_pem(RSA_KEY_PKCS8).expect("the RSA test key");
        let client_rsa = leaf(&["rsa-client.test"], ExtendedKeyUsagePurpose::ClientAuth)
            .signed_by(&rsa_key, &issuer)
            .expect("RSA client certificate");

        let (stranger_params, stranger_key) = ca("a CA nobody trusts");
        let stranger = stranger_params
            .self_signed(&stranger_key)
            .expect("stranger CA");

        Pki {
            ca: write("ca.pem", &ca_cert.pem()),
            server_cert: write("server.pem", &server.pem()),
            server_key: write("server.key", &server_key.serialize_pem()),
            expired_cert: write("expired.pem", &expired.pem()),
            expired_key: write("expired.key", &expired_key.serialize_pem()),
            client_cert: write("client.pem", &client.pem()),
            client_key: write("client.key", &client_key.serialize_pem()),
            client_key_sec1: write(
                "client-sec1.key",
                &pem("EC PRIVATE KEY", &inner_key(client_key.serialized_der())),
            ),
            client_rsa_cert: write("client-rsa.pem", &client_rsa.pem()),
            client_rsa_key: write(
                "client-rsa.key",
                &pem("RSA PRIVATE KEY", &inner_key(rsa_key.serialized_der())),
            ),
            stranger_ca: write("stranger.pem", &stranger.pem()),
            dir,
        }
    }

    /// The folder holding the files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Default for Pki {
    fn default() -> Self {
        Pki::new()
    }
}

fn ca(name: &str) -> (CertificateParams, KeyPair) {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    (params, KeyPair::generate().expect("key"))
}

fn leaf(names: &[&str], purpose: ExtendedKeyUsagePurpose) -> CertificateParams {
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let mut params = CertificateParams::new(names.clone()).expect("leaf params");
    params
        .distinguished_name
        .push(DnType::CommonName, &names[0]);
    params.extended_key_usages = vec![purpose];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params
}

/// The key inside a PKCS#8 `PrivateKeyInfo` (its `privateKey` OCTET
/// STRING): SEC1 for an EC key, PKCS#1 for an RSA key.
fn inner_key(pkcs8: &[u8]) -> Vec<u8> {
    let (info, _) = der(pkcs8); // the PrivateKeyInfo SEQUENCE
    let (_version, used) = der(info);
    let rest = &info[used..];
    let (_algorithm, used) = der(rest);
    let (key, _) = der(&rest[used..]);
    key.to_vec()
}

/// The content of the first DER element of `bytes`, and the element's
/// whole length (test input: well-formed by construction).
fn der(bytes: &[u8]) -> (&[u8], usize) {
    let (len, head) = match bytes[1] {
        n if n < 0x80 => (usize::from(n), 2),
        n => {
            let count = usize::from(n & 0x7f);
            let len = bytes[2..2 + count]
                .iter()
                .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
            (len, 2 + count)
        }
    };
    (&bytes[head..head + len], head + len)
}

fn pem(label: &str, der: &[u8]) -> String {
    let text = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in text.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).expect("base64 is ASCII"));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}
