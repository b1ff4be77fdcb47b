//! `#[spindle::main]` and `#[spindle::test]`: run a function's body on a new spindle
//! runtime. Use them through the `spindle` crate, which re-exports both; their arguments are
//! documented there (and on [`main`] and [`test`] below).

use proc_macro::TokenStream;
use quote::quote;
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::{parse_macro_input, Expr, ItemFn, Lit, Meta, Token};

/// Runs `main` on a new spindle runtime: the body runs in the runtime's `block_on` fiber,
/// a plain `fn` in blocking style, an `async fn` as a future polled in that fiber. Its return
/// value (which must be `Send`: a `Result`, say) is `main`'s.
///
/// ```ignore
/// #[spindle::main]
/// fn main() {
///     let h = spindle::spawn(|| 40 + 2);
///     assert_eq!(h.join().unwrap(), 42);
/// }
/// ```
///
/// # Arguments
///
/// All optional, comma-separated, as tokio's:
///
/// | argument | meaning |
/// |---|---|
/// | `worker_threads = N` | a `spindle::Runtime` of `N` worker threads (default: one per core, as `Runtime::new()`) |
/// | `flavor = "multi_thread"` | the default: a `spindle::Runtime`, whose workers are threads it starts |
/// | `flavor = "local"` (alias `"current_thread"`, tokio's name) | a `spindle::LocalRuntime`: the calling thread is the one worker, no worker thread is started; takes no `worker_threads` |
/// | `start_paused = true` | the runtime's clock starts paused (`spindle::time::pause`: sleeps and timeouts end as soon as nothing else can happen); needs one worker, so without `worker_threads` the runtime gets one (`worker_threads` above 1 is an error) |
///
/// ```ignore
/// #[spindle::main(worker_threads = 4)]
/// async fn main() -> std::io::Result<()> {
///     let listener = spindle::net::TcpListener::bind("127.0.0.1:0")?;
///     println!("{}", listener.local_addr()?);
///     Ok(())
/// }
/// ```
#[proc_macro_attribute]
pub fn main(args: TokenStream, item: TokenStream) -> TokenStream {
    let input = parse_macro_input!(item as ItemFn);
    expand(args, input, false).unwrap_or_else(|e| e.to_compile_error()).into()
}

/// A `#[test]` whose body runs on a new spindle runtime (one per test), as
/// [`main`](macro@main) runs `main`: a plain `fn` in blocking style or an `async fn`, in the
/// runtime's `block_on` fiber. It takes [`main`](macro@main)'s arguments (`worker_threads = N`,
/// `flavor = "local"` or `"multi_thread"`, `start_paused = true`); without `flavor` the test
/// gets a `spindle::Runtime` of one worker per core.
///
/// ```ignore
/// #[spindle::test(worker_threads = 2)]
/// async fn answers() {
///     spindle::task::yield_now().await;
/// }
///
/// #[spindle::test(flavor = "local")] // the test's own thread is the one worker
/// fn on_this_thread() {
///     assert_eq!(spindle::spawn(|| 1).join().unwrap(), 1);
/// }
///
/// #[spindle::test(start_paused = true)] // an hour of timeouts, at once
/// fn retries_back_off() {
///     let start = spindle::time::now();
///     spindle::time::sleep(std::time::Duration::from_secs(3600));
///     assert_eq!(spindle::time::now() - start, std::time::Duration::from_secs(3600));
/// }
/// ```
#[proc_macro_attribute]
pub fn test(args: TokenStream, item: TokenStream) -> TokenStream {
    let input = parse_macro_input!(item as ItemFn);
    expand(args, input, true).unwrap_or_else(|e| e.to_compile_error()).into()
}

fn expand(args: TokenStream, mut input: ItemFn, is_test: bool) -> syn::Result<proc_macro2::TokenStream> {
    let mut workers: Option<Expr> = None;
    let mut local = false;
    let mut start_paused: Option<Expr> = None;
    let metas = Punctuated::<Meta, Token![,]>::parse_terminated.parse(args)?;
    for meta in metas {
        match &meta {
            Meta::NameValue(nv) if nv.path.is_ident("worker_threads") => {
                if let Expr::Lit(lit) = &nv.value {
                    if !matches!(lit.lit, Lit::Int(_)) {
                        return Err(syn::Error::new_spanned(&nv.value, "worker_threads takes an integer"));
                    }
                }
                workers = Some(nv.value.clone());
            }
            Meta::NameValue(nv) if nv.path.is_ident("start_paused") => {
                if !matches!(&nv.value, Expr::Lit(syn::ExprLit { lit: Lit::Bool(_), .. })) {
                    return Err(syn::Error::new_spanned(&nv.value, "start_paused takes `true` or `false`"));
                }
                start_paused = Some(nv.value.clone());
            }
            Meta::NameValue(nv) if nv.path.is_ident("flavor") => {
                let flavor = match &nv.value {
                    Expr::Lit(syn::ExprLit { lit: Lit::Str(s), .. }) => s.value(),
                    _ => String::new(),
                };
                match flavor.as_str() {
                    "local" | "current_thread" => local = true,
                    "multi_thread" => local = false,
                    _ => {
                        return Err(syn::Error::new_spanned(
                            &nv.value,
                            "flavor takes \"local\" (alias \"current_thread\") or \"multi_thread\"",
                        ))
                    }
                }
            }
            _ => {
                return Err(syn::Error::new_spanned(
                    &meta,
                    "unknown argument; spindle::main / spindle::test take `worker_threads = N`, `flavor = \"local\"` \
                     (or \"multi_thread\") and `start_paused = true`",
                ))
            }
        }
    }
    if local && workers.is_some() {
        return Err(syn::Error::new_spanned(
            workers.as_ref(),
            "a local runtime's one worker is the calling thread: drop worker_threads, or the local flavor",
        ));
    }
    let paused = matches!(&start_paused, Some(Expr::Lit(syn::ExprLit { lit: Lit::Bool(b), .. })) if b.value);
    if let (true, Some(Expr::Lit(syn::ExprLit { lit: Lit::Int(n), .. }))) = (paused, &workers) {
        if n.base10_parse::<usize>()? > 1 {
            return Err(syn::Error::new_spanned(
                n,
                "paused time needs a runtime of one worker: drop worker_threads, or start_paused",
            ));
        }
    }
    if !input.sig.inputs.is_empty() {
        return Err(syn::Error::new_spanned(
            &input.sig.inputs,
            "a spindle::main or spindle::test function takes no arguments",
        ));
    }
    if input.sig.ident == "main" && is_test {
        return Err(syn::Error::new_spanned(&input.sig.ident, "use #[spindle::main] on main"));
    }
    let body = &input.block;
    let run = if input.sig.asyncness.take().is_some() {
        quote! { async move #body }
    } else {
        quote! { move || #body }
    };
    let workers = workers.map(|n| quote! { .worker_threads(#n) });
    let start_paused = start_paused.map(|p| quote! { .start_paused(#p) });
    let build = if local {
        quote! { build_local }
    } else {
        quote! { build }
    };
    let test_attr = is_test.then(|| quote! { #[::core::prelude::v1::test] });
    let attrs = &input.attrs;
    let vis = &input.vis;
    let sig = &input.sig;
    Ok(quote! {
        #test_attr
        #(#attrs)*
        #vis #sig {
            let runtime = ::spindle::Builder::new()
                #workers
                #start_paused
                .#build()
                .expect("failed to build the spindle runtime");
            runtime.block_on(#run)
        }
    })
}
