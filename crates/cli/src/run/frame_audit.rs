//! Where every frame of a port's buffer area is, as `bench` and `recv` report it.

use wirespeed_port::FrameAudit;

/// Where every frame of the buffer area is, as `bench` prints it.
pub fn frames_json(a: &FrameAudit) -> serde_json::Value {
    serde_json::json!({
        "total": a.total,
        "pool": a.pool,
        "fill": a.fill,
        "kernel": a.kernel,
        "rx": a.rx,
        "application": a.application,
        "tx": a.tx,
        "completion": a.completion,
        "balanced": a.balanced(),
    })
}
