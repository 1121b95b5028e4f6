//! One task per server: performs what its [`ServerMachine`] asks (connect,
//! list tools), reports what happened (connected, failed, closed) and
//! waits on {attempt, notifications, timer, shutdown}.
//!
//! A lost connection is noticed when the client's notification stream
//! ends (process exit, stream failure, session that could not be
//! re-initialized); `notifications/tools/list_changed` re-lists the tools.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mcpwire::manager::policy::Action;
use mcpwire::mcp::types::Tool;
use mcpwire::mcp::ServerNotification;
use mcpwire_tokio::{Client, ConnectOptions, Notifications, ServerConfig};
use tokio::sync::watch;

use crate::manager::{Plan, Shared};

/// A connection with its notification stream and first tool list.
struct Live {
    client: Client,
    notes: Notifications,
}

type Attempt =
    Pin<Box<dyn Future<Output = Result<(Live, Vec<Tool>), mcpwire_tokio::Error>> + Send>>;

/// Connects, subscribes to notifications (before listing, so no
/// `list_changed` is missed) and lists the tools.
async fn connect(
    config: ServerConfig,
    options: ConnectOptions,
) -> Result<(Live, Vec<Tool>), mcpwire_tokio::Error> {
    let client = Client::connect_with(config, options).await?;
    let notes = client.notifications();
    let tools = if client.server().capabilities.tools.is_some() {
        client.list_tools().await?
    } else {
        Vec::new()
    };
    Ok((Live { client, notes }, tools))
}

/// How long a closing connection may take when the manager closes.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

pub(crate) async fn run(shared: Arc<Shared>, plan: Plan, mut shutdown: watch::Receiver<bool>) {
    let Plan {
        idx,
        name,
        config,
        raw,
        mut machine,
        connect: options,
    } = plan;
    let mut attempt: Option<Attempt> = None;
    let mut live: Option<Live> = None;
    let mut generation = 0u64;
    machine.start(Instant::now());
    loop {
        while let Some(action) = machine.poll_action() {
            match action {
                Action::Connect { attempt: n } => {
                    if n > 0 {
                        tracing::info!("server `{name}`: reconnect attempt {n}");
                    }
                    attempt = Some(Box::pin(connect(config.clone(), options.clone())));
                }
                Action::GiveUp { error } => {
                    tracing::warn!("server `{name}`: {error}");
                }
                _ => {}
            }
        }
        shared.publish(idx, &machine, live.as_ref().map(|l| &l.client), generation);
        if *shutdown.borrow() {
            break;
        }
        let timer = machine.poll_timeout();
        tokio::select! {
            _ = shutdown.changed() => break,
            r = async { attempt.as_mut().expect("guarded").await }, if attempt.is_some() => {
                attempt = None;
                let now = Instant::now();
                match r {
                    Ok((l, tools)) => {
                        generation += 1;
                        shared.set_tools(idx, tools.clone());
                        machine.handle_connected(now);
                        tracing::debug!("server `{name}`: connected over {}", l.client.transport());
                        // Waiting calls go first; the cache write follows.
                        shared.publish(idx, &machine, Some(&l.client), generation);
                        live = Some(l);
                        if let Some(cache) = &shared.cache {
                            cache.store(&name, &raw, tools).await;
                        }
                    }
                    Err(e) => {
                        tracing::debug!("server `{name}`: connect failed: {e}");
                        machine.handle_connect_failed(now, e.to_string());
                    }
                }
            }
            n = async { live.as_mut().expect("guarded").notes.recv().await }, if live.is_some() => {
                match n {
                    Some(ServerNotification::ToolsListChanged) => {
                        let client = live.as_ref().expect("guarded").client.clone();
                        match client.list_tools().await {
                            Ok(tools) => {
                                shared.set_tools(idx, tools.clone());
                                if let Some(cache) = &shared.cache {
                                    cache.store(&name, &raw, tools).await;
                                }
                            }
                            // A closing connection ends the stream next.
                            Err(e) => tracing::debug!("server `{name}`: re-listing tools failed: {e}"),
                        }
                    }
                    Some(_) => {}
                    None => {
                        let gone = live.take().expect("guarded");
                        let reason = gone
                            .client
                            .closed_reason()
                            .unwrap_or("connection closed")
                            .to_string();
                        tracing::warn!("server `{name}`: connection lost: {reason}");
                        machine.handle_closed(Instant::now(), reason);
                    }
                }
            }
            _ = tokio::time::sleep_until(timer.unwrap_or_else(Instant::now).into()), if timer.is_some() => {
                machine.handle_timeout(Instant::now());
            }
        }
    }
    // Shutdown: no more attempts; close the live connection gracefully.
    drop(attempt);
    machine.close();
    shared.publish(idx, &machine, None, generation);
    if let Some(l) = live {
        let _ = l.client.close_timeout(CLOSE_GRACE).await;
    }
}
