//! `task_local!`: values set for a scope future's polls (following the task across workers)
//! or a `sync_scope` call, never seen by other tasks or fibers, nesting.

use std::time::Duration;

spindle::task_local! {
    static ID: u32;
    static NAME: String;
}

#[test]
fn a_scope_follows_its_task_across_polls_and_workers() {
    let rt = spindle::Builder::new().worker_threads(2).build().unwrap();
    let tasks: Vec<_> = (0..64u32)
        .map(|i| {
            rt.spawn_async(ID.scope(i, async move {
                for _ in 0..20 {
                    spindle::task::yield_now().await;
                    assert_eq!(ID.get(), i);
                }
                ID.get()
            }))
        })
        .collect();
    for (i, t) in tasks.into_iter().enumerate() {
        assert_eq!(t.join().unwrap(), i as u32);
    }
}

#[test]
fn outside_any_scope_there_is_no_value() {
    assert!(ID.try_with(|_| ()).is_err());
    let rt = spindle::Runtime::new().unwrap();
    rt.block_on(|| {
        assert!(ID.try_with(|_| ()).is_err());
        let inner = ID.sync_scope(1, || spindle::spawn(|| ID.try_with(|v| *v)).join().unwrap());
        assert!(inner.is_err(), "a fiber spawned in a scope is outside it");
    });
    let panicked = std::panic::catch_unwind(|| ID.get()).unwrap_err();
    assert!(panicked.downcast_ref::<String>().unwrap().contains("not set"));
}

#[test]
fn a_fiber_that_parks_in_a_sync_scope_keeps_its_value_to_itself() {
    let rt = spindle::Builder::new().build_local().unwrap();
    rt.block_on(|| {
        let fibers: Vec<_> = (0..8u32)
            .map(|i| {
                spindle::spawn(move || {
                    NAME.sync_scope(format!("fiber-{i}"), || {
                        spindle::time::sleep(Duration::from_millis(2)); // others run meanwhile
                        spindle::yield_now();
                        NAME.get()
                    })
                })
            })
            .collect();
        let names: Vec<_> = fibers.into_iter().map(|f| f.join().unwrap()).collect();
        assert_eq!(names, (0..8).map(|i| format!("fiber-{i}")).collect::<Vec<_>>());
        assert!(NAME.try_with(|_| ()).is_err());
    });
}

#[test]
fn scopes_nest_and_restore_the_outer_value() {
    let rt = spindle::Runtime::new().unwrap();
    let got = rt.block_on(ID.scope(1, async {
        let inner = ID.scope(2, async { ID.get() }).await;
        let sync_inner = ID.sync_scope(3, || ID.get());
        (inner, sync_inner, ID.get())
    }));
    assert_eq!(got, (2, 3, 1));
}

#[test]
fn a_dropped_scope_future_drops_its_future_inside_the_scope() {
    struct SeesId(std::sync::Arc<std::sync::Mutex<Option<u32>>>);
    impl Drop for SeesId {
        fn drop(&mut self) {
            *self.0.lock().unwrap() = ID.try_with(|v| *v).ok();
        }
    }
    let seen = std::sync::Arc::new(std::sync::Mutex::new(None));
    let guard = SeesId(seen.clone());
    let fut = ID.scope(9, async move {
        let _guard = guard;
        std::future::pending::<()>().await;
    });
    drop(fut);
    assert_eq!(*seen.lock().unwrap(), Some(9));
}
