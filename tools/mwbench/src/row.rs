//! One measured point: its fields, its JSON line (DESIGN §6), and the
//! statistics every latency point shares.
//!
//! Owns: the output record and its encoding/decoding. Must not: measure
//! anything or decide what is compared with what (that is `table`).

use serde_json::{json, Map, Value};

/// One measured point, memwire op or baseline.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Row {
    /// pingpong, bandwidth, bibw, rate, overhead, nton, loss, overlap, barrier, bcast, …
    pub bench: String,
    /// The memwire operation (`put_signal`, …, `memwire` for collectives) or
    /// the baseline (`udp_raw`, `tcp_raw`, `shm_floor`, `memcpy`, `mpich`, `openmpi`).
    pub op: String,
    /// The path: `udp` (sockets over loopback: memwire's UDP, raw UDP, raw
    /// TCP and MPI over TCP) or `shm` (shared memory).
    pub transport: String,
    /// Message size in bytes (collectives: as defined in `coll`; barrier 0).
    pub size: usize,
    /// Samples (latency points) or messages (throughput points).
    pub iters: usize,
    pub median_us: Option<f64>,
    pub p99_us: Option<f64>,
    /// Throughput in 10^6 bytes per second.
    pub mbps: Option<f64>,
    /// Operations (messages) per second.
    pub ops_per_s: Option<f64>,
    /// Job size of multi-rank points (nton, collectives).
    pub ranks: Option<u32>,
    /// Algorithm of a collective point.
    pub algo: Option<String>,
    /// Send order of an N-to-N point (in_order, shifted, multicast, alltoall).
    pub order: Option<String>,
    /// Injected datagram loss, percent (loss bench).
    pub loss_pct: Option<f64>,
    /// What actually carries a baseline when the path name does not say it
    /// (`tcp` for raw TCP and MPI over TCP; MPI's own shared memory).
    pub via: Option<String>,
    /// How memwire's ranks ran: `threads` (mwbench started them) or
    /// `processes` (under mwrun). Absent on baselines.
    pub launch: Option<String>,
    /// Where the bytes of a `udp` point went: `loopback` (both sides on
    /// one host) or `hosts` (between the hosts of an mwrun job). Rows of
    /// different paths are never compared (`table::same_point`).
    pub path: Option<String>,
    /// The UDP payload of one datagram on that path (memwire's and the raw
    /// baselines'; absent over TCP): 1472 between hosts unless `MW_MTU`
    /// says otherwise, 65000 on loopback.
    pub datagram: Option<usize>,
    /// Bench-specific fields (e.g. overlap's comm/comp/both times).
    pub extra: Map<String, Value>,
}

/// Rounds to 3 decimals (µs values) so lines stay short.
fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

impl Row {
    /// A row of `bench`/`op` over `transport` at `size` bytes.
    pub fn new(bench: &str, op: &str, transport: &str, size: usize) -> Row {
        Row { bench: bench.into(), op: op.into(), transport: transport.into(), size, ..Row::default() }
    }

    /// A latency row from per-iteration samples in µs (median and p99).
    pub fn latency(bench: &str, op: &str, transport: &str, size: usize, samples: Vec<f64>) -> Row {
        let (median, p99) = median_p99(samples.clone());
        Row { iters: samples.len(), median_us: Some(median), p99_us: Some(p99), ..Row::new(bench, op, transport, size) }
    }

    /// A throughput row: `count` messages of `size` bytes in `seconds`.
    pub fn throughput(
        bench: &str,
        op: &str,
        transport: &str,
        size: usize,
        count: usize,
        bytes: f64,
        seconds: f64,
    ) -> Row {
        let seconds = seconds.max(1e-9);
        Row { iters: count, mbps: Some(bytes / seconds / 1e6), ..Row::new(bench, op, transport, size) }
    }

    /// A message-rate row: `count` operations in `seconds`.
    pub fn rate(op: &str, transport: &str, size: usize, count: usize, seconds: f64) -> Row {
        Row { iters: count, ops_per_s: Some(count as f64 / seconds.max(1e-9)), ..Row::new("rate", op, transport, size) }
    }

    /// Marks a memwire row with how its ranks ran.
    pub fn launched(mut self, launch: &str) -> Row {
        self.launch = Some(launch.into());
        self
    }

    /// Sets `via`.
    pub fn via(mut self, via: &str) -> Row {
        self.via = Some(via.into());
        self
    }

    /// Whether this is one of DESIGN §6's baselines rather than a memwire op.
    pub fn is_baseline(&self) -> bool {
        is_baseline_op(&self.op)
    }

    /// The JSON object of DESIGN §6 (fields that do not apply are left out).
    pub fn to_json(&self) -> Value {
        let mut obj = json!({
            "bench": self.bench, "op": self.op, "transport": self.transport, "size": self.size, "iters": self.iters,
        });
        let o = obj.as_object_mut().expect("object");
        if let Some(m) = self.median_us {
            o.insert("median_us".into(), json!(round3(m)));
        }
        if let Some(p) = self.p99_us {
            o.insert("p99_us".into(), json!(round3(p)));
        }
        if let Some(b) = self.mbps {
            o.insert("MBps".into(), json!((b * 10.0).round() / 10.0));
        }
        if let Some(r) = self.ops_per_s {
            o.insert("ops_per_s".into(), json!(r.round()));
        }
        if let Some(n) = self.ranks {
            o.insert("ranks".into(), json!(n));
        }
        if let Some(a) = &self.algo {
            o.insert("algo".into(), json!(a));
        }
        if let Some(a) = &self.order {
            o.insert("order".into(), json!(a));
        }
        if let Some(l) = self.loss_pct {
            o.insert("loss_pct".into(), json!(l));
        }
        if let Some(v) = &self.via {
            o.insert("via".into(), json!(v));
        }
        if let Some(l) = &self.launch {
            o.insert("launch".into(), json!(l));
        }
        if let Some(p) = &self.path {
            o.insert("path".into(), json!(p));
        }
        if let Some(d) = self.datagram {
            o.insert("datagram".into(), json!(d));
        }
        for (k, v) in &self.extra {
            o.insert(k.clone(), v.clone());
        }
        obj
    }

    /// Reads a line written by [`Row::to_json`] (or by the MPI programs).
    /// Fails on a line that is not a point of the contract.
    pub fn from_json(v: &Value) -> Result<Row, String> {
        let o = v.as_object().ok_or("not a JSON object")?;
        let text = |k: &str| o.get(k).and_then(Value::as_str).map(String::from);
        let num = |k: &str| o.get(k).and_then(Value::as_f64);
        let int = |k: &str| o.get(k).and_then(Value::as_u64);
        let need = |k: &str| text(k).ok_or_else(|| format!("missing string field {k:?}"));
        let mut row = Row {
            bench: need("bench")?,
            op: need("op")?,
            transport: need("transport")?,
            size: int("size").ok_or("missing integer field \"size\"")? as usize,
            iters: int("iters").ok_or("missing integer field \"iters\"")? as usize,
            median_us: num("median_us"),
            p99_us: num("p99_us"),
            mbps: num("MBps"),
            ops_per_s: num("ops_per_s"),
            ranks: int("ranks").map(|n| n as u32),
            algo: text("algo"),
            order: text("order"),
            loss_pct: num("loss_pct"),
            via: text("via"),
            launch: text("launch"),
            path: text("path"),
            datagram: int("datagram").map(|d| d as usize),
            extra: Map::new(),
        };
        if row.median_us.is_none() && row.mbps.is_none() && row.ops_per_s.is_none() {
            return Err("no measurement (median_us, MBps or ops_per_s)".into());
        }
        const KNOWN: &[&str] = &[
            "bench",
            "op",
            "transport",
            "size",
            "iters",
            "median_us",
            "p99_us",
            "MBps",
            "ops_per_s",
            "ranks",
            "algo",
            "order",
            "loss_pct",
            "via",
            "launch",
            "path",
            "datagram",
        ];
        for (k, v) in o {
            if !KNOWN.contains(&k.as_str()) {
                row.extra.insert(k.clone(), v.clone());
            }
        }
        Ok(row)
    }
}

/// The baseline ops of DESIGN §6.
pub const BASELINES: &[&str] = &[
    "udp_raw",
    "udp_gso",
    "tcp_raw",
    "shm_floor",
    "shm_floor_2lines",
    "shm_floor_ring",
    "memcpy",
    "mpich",
    "openmpi",
    "oshmem",
];

/// Whether `op` is a baseline.
pub fn is_baseline_op(op: &str) -> bool {
    BASELINES.contains(&op)
}

/// Median and 99th percentile of `samples` (empty: NaN).
pub fn median_p99(mut samples: Vec<f64>) -> (f64, f64) {
    if samples.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    samples.sort_by(f64::total_cmp);
    let n = samples.len();
    (samples[n / 2], samples[(n * 99 / 100).min(n - 1)])
}

/// Median of `samples` (empty: NaN).
pub fn median(samples: Vec<f64>) -> f64 {
    median_p99(samples).0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trip_keeps_every_field() {
        let mut row = Row::latency("pingpong", "put_signal", "udp", 8, vec![3.0, 1.0, 2.0]).launched("threads");
        row.ranks = Some(2);
        row.loss_pct = Some(0.1);
        row.path = Some("hosts".into());
        row.datagram = Some(1472);
        row.extra.insert("comm_us".into(), json!(12.0));
        let back = Row::from_json(&row.to_json()).unwrap();
        assert_eq!(back, row);
        assert_eq!(back.median_us, Some(2.0));
        assert_eq!(back.iters, 3);
    }

    #[test]
    fn lines_without_a_measurement_or_fields_are_refused() {
        assert!(Row::from_json(&json!({"bench":"pingpong","op":"get","transport":"udp","size":8,"iters":1})).is_err());
        assert!(Row::from_json(&json!({"op":"get","transport":"udp","size":8,"iters":1,"median_us":1.0})).is_err());
        assert!(Row::from_json(&json!([1, 2])).is_err());
    }

    #[test]
    fn median_and_p99_of_a_hundred() {
        let (m, p) = median_p99((1..=100).map(f64::from).collect());
        assert_eq!((m, p), (51.0, 100.0));
        assert!(median(Vec::new()).is_nan());
    }
}
