//! The bridge's ports from OVSDB, read with the host's client ([`crate::host::ovsdb`]:
//! JSON-RPC, transactions, value encodings, port keys).
//!
//! It `monitor`s Bridge, Port, Interface and Flow_Table rows of the Open_vSwitch database and
//! publishes the classified ports of one bridge (see [`db`] for what makes a pod, gateway or
//! uplink port) on a `watch` channel, sorted, whenever they change. It also names npagent's OpenFlow tables
//! ([`tables`]). When OVSDB goes away it says so, keeps the last published ports (the
//! datapath still has them) and reconnects with backoff; the monitor reply on reconnect
//! replaces the whole state, so nothing missed meanwhile is lost. Once per connection it
//! makes the bridge's `fail_mode` `secure` ([`fail_mode`]).

pub mod db;
pub mod fail_mode;
pub mod tables;

use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::AsyncReadExt;
use tokio::sync::watch;

use crate::endpoint::Endpoint;
use crate::host::ovsdb::{rpc, transact, Error};
use crate::json_stream::JsonStream;
use db::{BridgePorts, Db};

const MIN_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);
const MONITOR_ID: u64 = 0;

/// The bridge npagent follows, and what it takes for an uplink beyond `antrea-type`.
#[derive(Debug, Clone, Default)]
pub struct BridgeSpec {
    pub name: String,
    /// Interfaces that are uplinks whatever their external_ids say (`--uplink`).
    pub uplinks: Vec<String>,
}

/// Follows the ports of `bridge` in the OVSDB at `ep`, publishing them on `ports_tx`,
/// and names the tables `table_names`. Runs until every receiver of `ports_tx` is gone;
/// never gives up on connection errors.
pub async fn run_ovsdb(
    ep: Endpoint,
    bridge: BridgeSpec,
    table_names: Vec<(u8, String)>,
    ports_tx: watch::Sender<BridgePorts>,
) {
    let mut backoff = MIN_BACKOFF;
    loop {
        let mut session = Session::new(&bridge, &table_names, &ports_tx);
        let result = session.run(&ep).await;
        if session.synced {
            backoff = MIN_BACKOFF;
        }
        match result {
            Ok(()) => return,
            Err(e) => {
                tracing::warn!("OVSDB {ep}: {e}; keeping the last known ports, retrying in {} ms", backoff.as_millis())
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = ports_tx.closed() => return,
        }
        backoff = backoff.saturating_mul(2).min(MAX_BACKOFF);
    }
}

/// One connection's worth of state.
struct Session<'a> {
    bridge: &'a str,
    uplinks: &'a [String],
    table_names: &'a [(u8, String)],
    ports_tx: &'a watch::Sender<BridgePorts>,
    db: Db,
    /// The monitor reply arrived.
    synced: bool,
    next_id: u64,
    pending_transact: Option<u64>,
    /// The bridge's fail_mode was looked at on this connection.
    fail_mode_checked: bool,
    /// The transact that sets fail_mode, while in flight: (id, the mode it replaces).
    pending_fail_mode: Option<(u64, Option<String>)>,
}

impl<'a> Session<'a> {
    fn new(bridge: &'a BridgeSpec, table_names: &'a [(u8, String)], ports_tx: &'a watch::Sender<BridgePorts>) -> Self {
        Session {
            bridge: &bridge.name,
            uplinks: &bridge.uplinks,
            table_names,
            ports_tx,
            db: Db::default(),
            synced: false,
            next_id: MONITOR_ID + 1,
            pending_transact: None,
            fail_mode_checked: false,
            pending_fail_mode: None,
        }
    }

    /// Ok when the receivers are gone; Err when the connection fails.
    async fn run(&mut self, ep: &Endpoint) -> Result<(), Error> {
        let mut conn = ep.connect().await?;
        let monitor = json!({
            "method": "monitor",
            "params": ["Open_vSwitch", "npagent", db::monitor_requests()],
            "id": MONITOR_ID,
        });
        rpc::send(&mut conn, &monitor).await?;
        let mut framer = JsonStream::new(rpc::MAX_MESSAGE);
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            let n = tokio::select! {
                r = conn.read(&mut chunk) => r?,
                _ = self.ports_tx.closed() => return Ok(()),
            };
            if n == 0 {
                return Err(Error::Closed);
            }
            framer.push(chunk.get(..n).unwrap_or_default())?;
            while let Some(msg) = framer.next_value()? {
                for reply in self.handle(&msg)? {
                    rpc::send(&mut conn, &reply).await?;
                }
            }
        }
    }

    /// Handles one incoming message; returns the messages to send.
    fn handle(&mut self, msg: &Value) -> Result<Vec<Value>, Error> {
        let mut out = Vec::new();
        let id = msg.get("id").cloned().unwrap_or(Value::Null);
        match msg.get("method").and_then(Value::as_str) {
            Some("echo") => {
                out.push(json!({"id": id, "result": msg.get("params").cloned().unwrap_or(json!([])), "error": null}));
            }
            Some("update") => {
                let updates = msg.get("params").and_then(|p| p.get(1)).unwrap_or(&Value::Null);
                self.apply(updates);
                self.after_change(&mut out);
            }
            Some(other) => {
                tracing::debug!("OVSDB sent unexpected method {other:?}");
                if !id.is_null() {
                    out.push(json!({"id": id, "result": null, "error": "unknown method"}));
                }
            }
            None => self.reply(msg, id.as_u64(), &mut out)?,
        }
        Ok(out)
    }

    fn reply(&mut self, msg: &Value, id: Option<u64>, out: &mut Vec<Value>) -> Result<(), Error> {
        let error = msg.get("error").filter(|e| !e.is_null());
        let result = msg.get("result").unwrap_or(&Value::Null);
        if id == Some(MONITOR_ID) {
            if let Some(e) = error {
                return Err(Error::Protocol(format!("monitor refused: {e}")));
            }
            self.db = Db::default();
            self.apply(result);
            let first = !self.synced;
            if first {
                tracing::info!("OVSDB connected, following bridge {}", self.bridge);
            }
            self.synced = true;
            // The first full state is always announced, even when equal, so that consumers
            // learn that OVSDB has been read (an empty bridge is a real answer).
            self.publish(out, first);
        } else if let Some((_, previous)) = self.pending_fail_mode.take_if(|(p, _)| Some(*p) == id) {
            let errors = match error {
                Some(e) => vec![e.to_string()],
                None => transact::errors(result),
            };
            let previous = previous.as_deref().unwrap_or("unset");
            if errors.is_empty() {
                tracing::warn!(
                    "bridge {} had fail_mode {previous}, which forwards everything with NORMAL while no controller is connected; set it to secure",
                    self.bridge
                );
            } else {
                tracing::error!(
                    "bridge {} has fail_mode {previous} and OVSDB refused to set it to secure ({}): while npagent is disconnected the bridge forwards traffic without enforcing any policy",
                    self.bridge,
                    errors.join("; ")
                );
            }
        } else if id.is_some() && id == self.pending_transact {
            self.pending_transact = None;
            let errors = match error {
                Some(e) => vec![e.to_string()],
                None => transact::errors(result),
            };
            for e in errors {
                tracing::warn!("OVSDB refused to name the OpenFlow tables: {e}");
            }
        }
        Ok(())
    }

    fn apply(&mut self, updates: &Value) {
        for p in self.db.apply(updates) {
            tracing::warn!("OVSDB: skipping malformed {p}");
        }
    }

    /// Publishes the ports if they changed, and names tables if needed.
    fn after_change(&mut self, out: &mut Vec<Value>) {
        self.publish(out, false)
    }

    /// Publishes the ports if they changed (or always, with `force`), and names tables if needed.
    fn publish(&mut self, out: &mut Vec<Value>, force: bool) {
        let (ports, problems) = self.db.bridge_ports(self.bridge, self.uplinks);
        let count = ports.pods.len();
        let changed = self.ports_tx.send_if_modified(|cur| {
            let changed = force || *cur != ports;
            if changed {
                *cur = ports;
            }
            changed
        });
        if changed {
            match &ports_gateway(self.ports_tx) {
                Some(gw) => tracing::debug!("{count} pod port(s) on {}, gateway {gw}", self.bridge),
                None => tracing::debug!("{count} pod port(s) on {}, no gateway port", self.bridge),
            }
            for p in problems {
                tracing::warn!("OVSDB: {p}");
            }
        }
        if self.pending_transact.is_none() && !self.table_names.is_empty() {
            if let Some(ops) = tables::name_ops(&self.db, self.bridge, self.table_names) {
                let id = self.transact(ops, out);
                self.pending_transact = Some(id);
            }
        }
        if !self.fail_mode_checked && self.db.bridge(self.bridge).is_some() {
            self.fail_mode_checked = true;
            if let Some((previous, ops)) = fail_mode::secure_ops(&self.db, self.bridge) {
                let id = self.transact(ops, out);
                self.pending_fail_mode = Some((id, previous));
            }
        }
    }

    /// Queues a `transact` of `ops` on `out`; returns its id.
    fn transact(&mut self, ops: Vec<Value>, out: &mut Vec<Value>) -> u64 {
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1).max(MONITOR_ID + 1);
        let mut params = vec![json!("Open_vSwitch")];
        params.extend(ops);
        out.push(json!({"method": "transact", "params": params, "id": id}));
        id
    }
}

fn ports_gateway(tx: &watch::Sender<BridgePorts>) -> Option<String> {
    tx.borrow().gateway.as_ref().map(|g| format!("{} (ofport {})", g.interface, g.ofport))
}
