//! One `transact` request, bounded in time, and the reading of its reply: the errors of its
//! operations and the rows they selected.

use std::time::Duration;

use serde_json::Value;

use super::{rpc, Error};
use crate::endpoint::Endpoint;

/// Bound on one transaction.
pub const WITHIN: Duration = Duration::from_secs(10);

/// Sends `params` (the database name, then the operations) as one `transact` on a connection
/// of its own and returns the reply's result; an error names `what` it was for.
pub async fn transact(server: &Endpoint, params: Value, what: &str) -> Result<Value, Error> {
    match tokio::time::timeout(WITHIN, rpc::call(server, "transact", params)).await {
        Ok(Ok(result)) => Ok(result),
        Ok(Err(e)) => Err(e.during(what)),
        Err(_) => Err(Error::NoAnswer { what: what.to_string(), server: server.clone(), within: WITHIN }),
    }
}

/// The errors in a `transact` reply (`error` members of its per-operation results).
pub fn errors(result: &Value) -> Vec<String> {
    result
        .as_array()
        .map(|ops| {
            ops.iter()
                .filter_map(|op| op.get("error").map(|e| format!("{e} {}", op.get("details").unwrap_or(&Value::Null))))
                .collect()
        })
        .unwrap_or_else(|| vec![format!("unexpected transact result {result}")])
}

/// The rows the `op`th operation (a `select`) of a `transact` reply found.
pub fn rows(result: &Value, op: usize) -> &[Value] {
    result.get(op).and_then(|o| o.get("rows")).and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default()
}
