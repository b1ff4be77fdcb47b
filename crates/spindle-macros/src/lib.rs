//! `#[spindle::main]` and `#[spindle::test]`: run a function's body on a new spindle
//! runtime. Use them through the `spindle` crate, which re-exports both.
//!
//! The body runs in the runtime's `block_on` fiber: a plain `fn` in blocking style, an
//! `async fn` as a future polled in that fiber. Its return value (which must be `Send`) is the
//! function's. Arguments: `worker_threads = N` (default: one per core), or
//! `flavor = "local"` (alias `"current_thread"`, tokio's name): a `spindle::LocalRuntime`,
//! whose one worker is the calling thread (no worker thread is started);
//! `flavor = "multi_thread"` is the default, a `spindle::Runtime` with worker threads.

use proc_macro::TokenStream;
use quote::quote;
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::{parse_macro_input, Expr, ItemFn, Lit, Meta, Token};

/// Runs `main` on a spindle runtime.
///
/// ```ignore
/// #[spindle::main]
/// fn main() {
///     let h = spindle::spawn(|| 40 + 2);
///     assert_eq!(h.join().unwrap(), 42);
/// }
/// ```
#[proc_macro_attribute]
pub fn main(args: TokenStream, item: TokenStream) -> TokenStream {
    let input = parse_macro_input!(item as ItemFn);
    expand(args, input, false).unwrap_or_else(|e| e.to_compile_error()).into()
}

/// A `#[test]` whose body runs on a new spindle runtime (one per test).
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
/// ```
#[proc_macro_attribute]
pub fn test(args: TokenStream, item: TokenStream) -> TokenStream {
    let input = parse_macro_input!(item as ItemFn);
    expand(args, input, true).unwrap_or_else(|e| e.to_compile_error()).into()
}

fn expand(args: TokenStream, mut input: ItemFn, is_test: bool) -> syn::Result<proc_macro2::TokenStream> {
    let mut workers: Option<Expr> = None;
    let mut local = false;
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
                    "unknown argument; spindle::main / spindle::test take `worker_threads = N` and `flavor = \"local\"`",
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
                .#build()
                .expect("failed to build the spindle runtime");
            runtime.block_on(#run)
        }
    })
}
