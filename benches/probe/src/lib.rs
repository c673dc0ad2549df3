//! A component whose one export does nothing: the benchmarks call it to measure the cost of a
//! host-to-guest call on Seam's engine, apart from any work a real provider does.

wit_bindgen::generate!({ path: "wit", world: "probe" });

struct Probe;

export!(Probe);

impl Guest for Probe {
    fn noop() {}
}
