//! A client for the MCP conformance suite (`@modelcontextprotocol/conformance`).
//!
//! The suite runs `conformance-client <server-url>` with
//! `MCP_CONFORMANCE_SCENARIO` set, and judges what the client does on the
//! wire. Exit status 0 when every step the scenario asks for succeeded.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use mcpwire::auth::{base64url, AssertionClaims, ClientCredentials, Grant, TokenAuthMethod};
use mcpwire_tests::oauth::fetch_redirect;
use mcpwire_tokio::auth::FnRedirect;
use mcpwire_tokio::{
    AuthOptions, Client, ConnectOptions, EnterpriseIdpOptions, ErrorObject, ServerConfig,
    TokenSource,
};
use serde_json::{json, Map, Value};

/// The Client ID Metadata Document URL the suite expects (basic-cimd).
const CIMD_URL: &str = "https://conformance-test.local/client-metadata.json";

/// Signs an RFC 7523 client assertion with ES256 (the suite's
/// `private_key_jwt` scenario hands over a PKCS#8 PEM key).
fn es256_signer(pem: &str) -> Result<mcpwire::auth::AssertionSigner, String> {
    use ring::signature::{EcdsaKeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
    let b64: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    let der = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .map_err(|e| format!("private key PEM: {e}"))?;
    let rng = ring::rand::SystemRandom::new();
    let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &der, &rng)
        .map_err(|e| format!("private key: {e}"))?;
    Ok(Arc::new(move |c: &AssertionClaims| {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_err(|e| e.to_string())?
            .as_secs();
        let header = base64url(br#"{"alg":"ES256","typ":"JWT"}"#);
        let claims = json!({
            "iss": c.client_id, "sub": c.client_id, "aud": c.audience,
            "iat": now, "exp": now + 300, "jti": c.jti,
        });
        let claims = base64url(claims.to_string().as_bytes());
        let input = format!("{header}.{claims}");
        let sig = key
            .sign(&ring::rand::SystemRandom::new(), input.as_bytes())
            .map_err(|e| format!("signing: {e}"))?;
        Ok(format!("{input}.{}", base64url(sig.as_ref())))
    }))
}

/// OAuth for the `auth/*` scenarios, from the scenario name and the
/// context the suite passes in `MCP_CONFORMANCE_CONTEXT`.
fn auth_options(scenario: &str) -> Result<AuthOptions, String> {
    let context: Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|c| serde_json::from_str(&c).ok())
        .unwrap_or(Value::Null);
    let mut auth = AuthOptions::new(FnRedirect::new(
        "http://127.0.0.1:3333/callback",
        |url: &str| fetch_redirect(url).map_err(Into::into),
    ))
    .client_metadata_url(CIMD_URL);
    if let Some(id) = context["client_id"].as_str() {
        let mut client = ClientCredentials::public(id);
        client.client_secret = context["client_secret"].as_str().map(str::to_owned);
        if let Some(pem) = context["private_key_pem"].as_str() {
            client.auth_method = Some(TokenAuthMethod::PrivateKeyJwt);
            let signer = es256_signer(pem)?;
            auth = auth.config(|c| c.assertion = Some(signer));
        }
        auth = auth.client(client);
    }
    if scenario.starts_with("auth/client-credentials") {
        auth = auth.config(|c| c.grant = Grant::ClientCredentials);
    }
    // Workload identity federation: the workload's JWT is handed over.
    if let Some(jwt) = context["valid_jwt"].as_str() {
        auth = auth.workload_identity(TokenSource::Value(jwt.to_owned()));
    }
    // Enterprise-managed authorization: the user's ID token from the
    // enterprise IdP and where to exchange it.
    if let (Some(endpoint), Some(id_token)) = (
        context["idp_token_endpoint"].as_str(),
        context["idp_id_token"].as_str(),
    ) {
        let idp = EnterpriseIdpOptions {
            token_endpoint: endpoint.to_owned(),
            client_id: context["idp_client_id"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            client_secret: context["idp_client_secret"].as_str().map(str::to_owned),
        };
        auth = auth.enterprise(idp, TokenSource::Value(id_token.to_owned()));
    }
    Ok(auth)
}

/// Fills an elicitation answer with the defaults of the requested schema
/// (SEP-1034: a client applies the defaults of omitted fields).
fn defaults_of(params: &Value) -> Value {
    let mut content = Map::new();
    if let Some(props) = params["requestedSchema"]["properties"].as_object() {
        for (name, schema) in props {
            if let Some(d) = schema.get("default") {
                content.insert(name.clone(), d.clone());
            }
        }
    }
    json!({ "action": "accept", "content": content })
}

async fn run(url: &str, scenario: &str) -> Result<(), String> {
    let mut options = ConnectOptions::new()
        .client_info("mcpwire-conformance-client", env!("CARGO_PKG_VERSION"))
        .timeout(Duration::from_secs(20));
    if scenario.starts_with("auth/") {
        options = options.auth(auth_options(scenario)?);
    }
    if scenario.starts_with("elicitation") {
        options =
            options.elicitation(|params| async move { Ok::<_, ErrorObject>(defaults_of(&params)) });
    }
    if scenario == "sep-2322-client-request-state" {
        // input_required rounds: confirm what is asked.
        options = options.elicitation(|_params| async move {
            Ok::<_, ErrorObject>(json!({ "action": "accept", "content": { "confirmed": true } }))
        });
    }
    let client = Client::connect_with(ServerConfig::http(url), options)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let tools = if client.server().capabilities.tools.is_some() {
        client
            .list_tools()
            .await
            .map_err(|e| format!("tools/list: {e}"))?
    } else {
        Vec::new()
    };
    let call = |name: String, args: Value| {
        let client = client.clone();
        async move {
            let r = client
                .call_tool(&name, args)
                .await
                .map_err(|e| format!("tools/call {name}: {e}"))?;
            if r.is_error() {
                return Err(format!("tools/call {name} returned isError: {}", r.text()));
            }
            eprintln!("{name}: {}", r.text());
            Ok::<_, String>(())
        }
    };
    match scenario {
        "initialize" => {}
        "tools_call" => call("add_numbers".into(), json!({"a": 5, "b": 3})).await?,
        "elicitation-sep1034-client-defaults" => {
            call("test_client_elicitation_defaults".into(), json!({})).await?
        }
        "sse-retry" => call("test_reconnection".into(), json!({})).await?,
        "request-metadata" | "json-schema-ref-no-deref" => {}
        "http-custom-headers" => {
            // The exact arguments the suite wants mirrored in headers.
            let context: Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
                .ok()
                .and_then(|c| serde_json::from_str(&c).ok())
                .unwrap_or(Value::Null);
            for c in context["toolCalls"].as_array().into_iter().flatten() {
                let name = c["name"].as_str().unwrap_or_default().to_owned();
                call(name, c["arguments"].clone()).await?;
            }
        }
        "http-invalid-tool-headers" => {
            // Tools with invalid x-mcp-header annotations are not listed;
            // call every one that is.
            for t in &tools {
                let _ = call(t.name.clone(), json!({"region": "us-west1"})).await;
            }
        }
        "json-schema-2020-12-preservation" => {
            let focal = tools
                .iter()
                .find(|t| t.name == "json_schema_2020_12_tool")
                .ok_or("no json_schema_2020_12_tool")?;
            call(
                "json_schema_echo".into(),
                json!({ "schema": focal.input_schema }),
            )
            .await?;
        }
        "sep-2322-client-request-state" | "http-standard-headers" => {
            // Every tool (input_required rounds; the headers of tools/call).
            for t in &tools {
                call(t.name.clone(), json!({})).await?;
            }
        }
        _ => {
            // Other scenarios (auth/*): use the first tool the server offers.
            if let Some(t) = tools.first() {
                call(t.name.clone(), json!({})).await?;
            }
        }
    }
    if scenario == "http-standard-headers" {
        // The other methods whose headers are checked: reads and gets.
        if client.server().capabilities.resources.is_some() {
            for r in client
                .list_resources()
                .await
                .map_err(|e| format!("resources/list: {e}"))?
            {
                client
                    .read_resource(&r.uri)
                    .await
                    .map_err(|e| format!("resources/read {}: {e}", r.uri))?;
            }
        }
        if client.server().capabilities.prompts.is_some() {
            for p in client
                .list_prompts()
                .await
                .map_err(|e| format!("prompts/list: {e}"))?
            {
                client
                    .get_prompt(&p.name, json!({}))
                    .await
                    .map_err(|e| format!("prompts/get {}: {e}", p.name))?;
            }
        }
    }
    client.close().await.map_err(|e| format!("close: {e}"))
}

fn main() -> ExitCode {
    let Some(url) = std::env::args().nth(1) else {
        eprintln!("usage: conformance-client <server-url>  (MCP_CONFORMANCE_SCENARIO selects the scenario)");
        return ExitCode::from(2);
    };
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    match rt.block_on(run(&url, &scenario)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("conformance-client ({scenario}): {e}");
            ExitCode::from(1)
        }
    }
}
