//! A request's query string (`a=1&b=x%2Fy`) as decoded name/value pairs.

/// The decoded parameters, in order.
#[derive(Debug, Default)]
pub struct Query(Vec<(String, String)>);

impl Query {
    /// Parses `query` (the part after `?`, if any). Fails on a malformed `%` escape or one that
    /// does not decode to UTF-8.
    pub fn parse(query: Option<&str>) -> Result<Self, String> {
        let mut pairs = Vec::new();
        for part in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (name, value) = part.split_once('=').unwrap_or((part, ""));
            pairs.push((decode(name)?, decode(value)?));
        }
        Ok(Self(pairs))
    }

    /// The value of the first parameter called `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// The value of `name` as a number; `None` when absent, an error when not a number.
    pub fn number(&self, name: &str) -> Result<Option<u64>, String> {
        self.get(name).map(|v| v.parse().map_err(|_| format!("{name}={v:?} is not a number"))).transpose()
    }
}

/// `application/x-www-form-urlencoded` decoding: `+` is a space, `%XX` a byte.
fn decode(s: &str) -> Result<String, String> {
    let mut out = Vec::with_capacity(s.len());
    let mut bytes = s.bytes();
    while let Some(b) = bytes.next() {
        match b {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = [bytes.next(), bytes.next()];
                let byte = match hex {
                    [Some(h), Some(l)] => match (char::from(h).to_digit(16), char::from(l).to_digit(16)) {
                        (Some(h), Some(l)) => u8::try_from(h * 16 + l).ok(),
                        _ => None,
                    },
                    _ => None,
                };
                out.push(byte.ok_or_else(|| format!("malformed %-escape in {s:?}"))?);
            }
            b => out.push(b),
        }
    }
    String::from_utf8(out).map_err(|_| format!("{s:?} does not decode to UTF-8"))
}
