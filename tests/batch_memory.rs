//! A batch over `server.max_batch_len` is refused before its members become entries and
//! answers: the heap it costs is measured by a counting allocator around one real call. (Its own
//! test binary, so no other test allocates meanwhile.)
// `deny`, not `forbid`: a global allocator is an `unsafe impl` by its nature, allowed for that
// one impl below and nowhere else.
#![deny(unsafe_code)]

mod support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

#[tokio::test]
async fn a_1_mb_batch_of_empty_members_costs_little_heap() {
    let gw = support::gateway().start().await;
    // Just under the 1 MiB body limit: about 350 000 members, each an invalid request.
    let n = (1 << 20) / 3 - 10;
    let body = format!("[{}]", vec!["{}"; n].join(","));
    // Warm the client and the gateway's connection first.
    let _ = gw
        .post(
            "application/json",
            br#"{"jsonrpc":"2.0","id":1,"method":"_cleveragents/health/check"}"#.to_vec(),
            &[],
        )
        .await;
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let a = gw.post("application/json", body.into_bytes(), &[]).await;
    let peak = PEAK.load(Ordering::Relaxed) - before;
    assert_eq!(a.status, 400);
    assert_eq!(a.json()["error"]["code"], -32600, "{}", a.text);
    // The body itself is in memory up to three times (sent, received, collected); what the
    // members would cost as entries and answers (about 27 MB) is not.
    assert!(
        peak < 6 << 20,
        "peak heap during the call: {} KB",
        peak >> 10
    );
}
