//! The service generator: tonic-prost-build's, then the typed fast path beside its output.
//!
//! tonic's generator writes, per service, a client module and a server module. This one parses
//! that output (syn), adds the typed dispatch *inside* tonic's server module (it reads the
//! server's private fields: the service `Arc` and the codec limits), appends the typed module
//! (the method list and the typed client), and prints the file again (prettyplease).
//!
//! The generated code stays small: one table, one `match` and one thin method per RPC; the
//! machinery (routing, deadlines, cancellation, limits, panics, streams) is in
//! `spindle_grpc::typed`.

use proc_macro2::TokenStream;
use quote::{format_ident, quote};

/// What the generator needs beyond tonic's own settings.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    pub(crate) client: bool,
    pub(crate) server: bool,
    pub(crate) proto_path: String,
    pub(crate) use_arc_self: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options { client: true, server: true, proto_path: "super".into(), use_arc_self: false }
    }
}

pub(crate) struct Generator {
    tonic: Box<dyn prost_build::ServiceGenerator>,
    options: Options,
}

impl Generator {
    pub(crate) fn new(tonic: Box<dyn prost_build::ServiceGenerator>, options: Options) -> Generator {
        Generator { tonic, options }
    }
}

impl prost_build::ServiceGenerator for Generator {
    fn generate(&mut self, service: prost_build::Service, buf: &mut String) {
        let mut tonic_code = String::new();
        self.tonic.generate(service.clone(), &mut tonic_code);
        let mut file: syn::File = match syn::parse_file(&tonic_code) {
            Ok(file) => file,
            Err(e) => panic!("spindle-grpc-build: cannot parse tonic's code for {}: {e}", service.name),
        };
        add_typed(&mut file, &service, &self.options);
        buf.push_str(&prettyplease::unparse(&file));
    }

    fn finalize(&mut self, buf: &mut String) {
        self.tonic.finalize(buf);
    }

    fn finalize_package(&mut self, package: &str, buf: &mut String) {
        self.tonic.finalize_package(package, buf);
    }
}

/// One method, as the generated code names it.
struct Rpc {
    /// The trait method and client method (`unary_call`).
    ident: syn::Ident,
    /// The name in the proto file (`UnaryCall`).
    proto_name: String,
    request: TokenStream,
    response: TokenStream,
    client_streaming: bool,
    server_streaming: bool,
}

impl Rpc {
    fn kind(&self) -> TokenStream {
        match (self.client_streaming, self.server_streaming) {
            (false, false) => quote!(Unary),
            (false, true) => quote!(ServerStreaming),
            (true, false) => quote!(ClientStreaming),
            (true, true) => quote!(Streaming),
        }
    }
}

/// A message type as tonic-prost-build names it from a module beside the messages.
fn rust_type(ty: &str, proto_path: &str) -> TokenStream {
    let path = if ty.starts_with("::") || ty.starts_with("crate::") || ty.ends_with("()") {
        ty.to_string()
    } else {
        format!("{proto_path}::{}", ty.replace('.', "::"))
    };
    match syn::parse_str::<syn::Type>(&path) {
        Ok(ty) => quote!(#ty),
        Err(e) => panic!("spindle-grpc-build: message type {path:?}: {e}"),
    }
}

/// tonic-build's module names: `TestService` → `test_service`.
fn snake(name: &str) -> String {
    let mut out = String::new();
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        out.push(c.to_ascii_lowercase());
        if chars.peek().is_some_and(|next| next.is_uppercase()) {
            out.push('_');
        }
    }
    out
}

/// The module of `file` holding a struct named `name`, if any.
fn module_with<'a>(file: &'a mut syn::File, name: &syn::Ident) -> Option<&'a mut syn::ItemMod> {
    file.items.iter_mut().find_map(|item| match item {
        syn::Item::Mod(module) => {
            let (_, items) = module.content.as_ref()?;
            let holds = items.iter().any(|i| matches!(i, syn::Item::Struct(s) if s.ident == *name));
            holds.then_some(module)
        }
        _ => None,
    })
}

fn add_typed(file: &mut syn::File, service: &prost_build::Service, options: &Options) {
    let full_name = if service.package.is_empty() {
        service.proto_name.clone()
    } else {
        format!("{}.{}", service.package, service.proto_name)
    };
    let rpcs: Vec<Rpc> = service
        .methods
        .iter()
        .map(|m| Rpc {
            ident: format_ident!("{}", m.name),
            proto_name: m.proto_name.clone(),
            request: rust_type(&m.input_type, &options.proto_path),
            response: rust_type(&m.output_type, &options.proto_path),
            client_streaming: m.client_streaming,
            server_streaming: m.server_streaming,
        })
        .collect();
    let typed_mod = format_ident!("{}_typed", snake(&service.name));
    let client_ident = format_ident!("{}Client", service.name);
    let server_ident = format_ident!("{}Server", service.name);

    if options.server {
        if let Some(module) = module_with(file, &server_ident) {
            let items = server_items(service, &rpcs, &typed_mod, options);
            let parsed: syn::File =
                syn::parse2(items).expect("spindle-grpc-build: the typed dispatch parses");
            module.content.as_mut().expect("a module with content").1.extend(parsed.items);
        }
    }
    let tonic_client = if options.client {
        module_with(file, &client_ident).map(|module| module.ident.clone())
    } else {
        None
    };
    let module = typed_module(&full_name, &rpcs, &typed_mod, &client_ident, tonic_client.as_ref());
    let parsed: syn::File = syn::parse2(module).expect("spindle-grpc-build: the typed module parses");
    file.items.extend(parsed.items);
}

/// The typed dispatch, added inside tonic's server module.
fn server_items(
    service: &prost_build::Service,
    rpcs: &[Rpc],
    typed_mod: &syn::Ident,
    options: &Options,
) -> TokenStream {
    let trait_ident = format_ident!("{}", service.name);
    let server_ident = format_ident!("{}Server", service.name);
    let arms = rpcs.iter().enumerate().map(|(i, rpc)| {
        let ident = &rpc.ident;
        let request = &rpc.request;
        let (adapter, request) = match (rpc.client_streaming, rpc.server_streaming) {
            (false, false) => (quote!(unary), quote!(tonic::Request<#request>)),
            (false, true) => (quote!(server_streaming), quote!(tonic::Request<#request>)),
            (true, false) => (quote!(client_streaming), quote!(tonic::Request<tonic::Streaming<#request>>)),
            (true, true) => (quote!(streaming), quote!(tonic::Request<tonic::Streaming<#request>>)),
        };
        let inner = if options.use_arc_self { quote!(inner) } else { quote!(&inner) };
        quote! {
            #i => {
                let inner = self.0.clone();
                call.#adapter(move |request: #request| async move {
                    <T as #trait_ident>::#ident(#inner, request).await
                })
            }
        }
    });
    quote! {
        /// The typed entry point of this server (spindle-grpc's fast path): register the
        /// server with `spindle_grpc::Channel::add_typed_service`.
        impl<T: #trait_ident> spindle_grpc::typed::TypedService for #server_ident<T> {
            fn typed_entry(&self) -> spindle_grpc::typed::Entry {
                spindle_grpc::typed::Entry::new(
                    SpindleTyped(self.inner.clone()),
                    self.max_decoding_message_size,
                    self.max_encoding_message_size,
                )
            }
        }

        /// The service's methods behind spindle-grpc's typed dispatch.
        struct SpindleTyped<T>(std::sync::Arc<T>);

        impl<T: #trait_ident> spindle_grpc::typed::Dispatch for SpindleTyped<T> {
            fn methods(&self) -> &'static [spindle_grpc::typed::Method] {
                &super::#typed_mod::METHODS
            }

            fn call(
                &self,
                method: usize,
                call: spindle_grpc::typed::Call<'_>,
            ) -> std::result::Result<spindle_grpc::typed::BoxHandler, tonic::Status> {
                match method {
                    #(#arms)*
                    _ => call.unimplemented(),
                }
            }
        }
    }
}

/// The typed module: the method list, and the typed client over tonic's.
fn typed_module(
    full_name: &str,
    rpcs: &[Rpc],
    typed_mod: &syn::Ident,
    client_ident: &syn::Ident,
    tonic_client: Option<&syn::Ident>,
) -> TokenStream {
    let count = rpcs.len();
    let methods = rpcs.iter().map(|rpc| {
        let (name, kind, request, response) = (&rpc.proto_name, rpc.kind(), &rpc.request, &rpc.response);
        quote! {
            spindle_grpc::typed::Method::new(
                #name,
                spindle_grpc::typed::Kind::#kind,
                std::any::TypeId::of::<#request>,
                std::any::TypeId::of::<#response>,
            )
        }
    });
    let client = tonic_client.map(|tonic_mod| typed_client(rpcs, client_ident, tonic_mod));
    let doc = format!(
        " spindle-grpc's typed fast path for `{full_name}`: the method list{}.",
        if client.is_some() { " and the typed client" } else { "" }
    );
    quote! {
        #[doc = #doc]
        pub mod #typed_mod {
            #![allow(
                unused_variables,
                dead_code,
                missing_docs,
                clippy::wildcard_imports,
                clippy::let_unit_value,
            )]
            use tonic::codegen::*;

            /// The service's full name.
            pub const SERVICE_NAME: &str = #full_name;

            /// The service's methods (name, kind, message types), which the typed client and
            /// the typed server compare.
            pub static METHODS: [spindle_grpc::typed::Method; #count] = [#(#methods),*];

            #client
        }
    }
}

/// The typed client: tonic's client API, each call offered to the typed path first. The
/// encoded path's future is boxed: inline, its ~1.6 KiB would be moved with every typed call.
fn typed_client(rpcs: &[Rpc], client_ident: &syn::Ident, tonic_mod: &syn::Ident) -> TokenStream {
    let methods = rpcs.iter().enumerate().map(|(i, rpc)| {
        let (ident, request, response) = (&rpc.ident, &rpc.request, &rpc.response);
        let doc = format!(" `{}`: see tonic's client method of the same name.", rpc.proto_name);
        match (rpc.client_streaming, rpc.server_streaming) {
            (false, false) => quote! {
                #[doc = #doc]
                pub async fn #ident(
                    &mut self,
                    request: impl tonic::IntoRequest<#request>,
                ) -> std::result::Result<tonic::Response<#response>, tonic::Status> {
                    match self.typed.unary::<#request, #response>(#i, request.into_request()) {
                        Ok(call) => call.await,
                        Err(request) => Box::pin(self.inner.#ident(request)).await,
                    }
                }
            },
            (false, true) => quote! {
                #[doc = #doc]
                pub async fn #ident(
                    &mut self,
                    request: impl tonic::IntoRequest<#request>,
                ) -> std::result::Result<
                    tonic::Response<spindle_grpc::typed::Streaming<#response>>,
                    tonic::Status,
                > {
                    match self.typed.server_streaming::<#request, #response>(#i, request.into_request()) {
                        Ok(call) => call.await,
                        Err(request) => Box::pin(self.inner.#ident(request)).await.map(|r| r.map(Into::into)),
                    }
                }
            },
            (true, false) => quote! {
                #[doc = #doc]
                pub async fn #ident(
                    &mut self,
                    request: impl tonic::IntoStreamingRequest<Message = #request>,
                ) -> std::result::Result<tonic::Response<#response>, tonic::Status> {
                    let request = request.into_streaming_request();
                    match self.typed.client_streaming::<#request, #response, _>(#i, request) {
                        Ok(call) => call.await,
                        Err(request) => Box::pin(self.inner.#ident(request)).await,
                    }
                }
            },
            (true, true) => quote! {
                #[doc = #doc]
                pub async fn #ident(
                    &mut self,
                    request: impl tonic::IntoStreamingRequest<Message = #request>,
                ) -> std::result::Result<
                    tonic::Response<spindle_grpc::typed::Streaming<#response>>,
                    tonic::Status,
                > {
                    let request = request.into_streaming_request();
                    match self.typed.streaming::<#request, #response, _>(#i, request) {
                        Ok(call) => call.await,
                        Err(request) => Box::pin(self.inner.#ident(request)).await.map(|r| r.map(Into::into)),
                    }
                }
            },
        }
    });
    quote! {
        /// tonic's client with spindle-grpc's typed fast path: on a `spindle_grpc::Channel`
        /// (or `AnyChannel::Local`) where the service was registered with
        /// `add_typed_service`, calls move their messages to the handler and back, never
        /// encoding them; on any other transport they are tonic's client's calls.
        #[derive(Debug, Clone)]
        pub struct #client_ident<T> {
            inner: super::#tonic_mod::#client_ident<T>,
            typed: spindle_grpc::typed::Client,
        }

        impl<T> #client_ident<T>
        where
            T: tonic::client::GrpcService<tonic::body::Body> + 'static,
            T::Error: Into<StdError>,
            T::ResponseBody: Body<Data = Bytes> + std::marker::Send + 'static,
            <T::ResponseBody as Body>::Error: Into<StdError> + std::marker::Send,
        {
            /// A client on `inner`, typed if `inner` is an in-process channel with this
            /// service registered typed.
            pub fn new(inner: T) -> Self {
                let typed = spindle_grpc::typed::Client::new(&inner, SERVICE_NAME, &METHODS);
                Self { inner: super::#tonic_mod::#client_ident::new(inner), typed }
            }

            /// tonic's `with_origin` (the typed path has no URI).
            pub fn with_origin(inner: T, origin: http::Uri) -> Self {
                let typed = spindle_grpc::typed::Client::new(&inner, SERVICE_NAME, &METHODS);
                Self { inner: super::#tonic_mod::#client_ident::with_origin(inner, origin), typed }
            }

            /// A client whose calls pass `interceptor` first, on both paths.
            pub fn with_interceptor<F>(inner: T, interceptor: F) -> #client_ident<InterceptedService<T, F>>
            where
                F: tonic::service::Interceptor + Clone + std::marker::Send + std::marker::Sync + 'static,
                T::ResponseBody: Default,
                T: tonic::codegen::Service<
                    http::Request<tonic::body::Body>,
                    Response = http::Response<
                        <T as tonic::client::GrpcService<tonic::body::Body>>::ResponseBody,
                    >,
                >,
                <T as tonic::codegen::Service<http::Request<tonic::body::Body>>>::Error:
                    Into<StdError> + std::marker::Send + std::marker::Sync,
            {
                let typed = spindle_grpc::typed::Client::new(&inner, SERVICE_NAME, &METHODS)
                    .with_interceptor(interceptor.clone());
                #client_ident {
                    inner: super::#tonic_mod::#client_ident::with_interceptor(inner, interceptor),
                    typed,
                }
            }

            /// tonic's `send_compressed` (the typed path has nothing to compress).
            #[must_use]
            pub fn send_compressed(mut self, encoding: CompressionEncoding) -> Self {
                self.inner = self.inner.send_compressed(encoding);
                self
            }

            /// tonic's `accept_compressed`.
            #[must_use]
            pub fn accept_compressed(mut self, encoding: CompressionEncoding) -> Self {
                self.inner = self.inner.accept_compressed(encoding);
                self
            }

            /// The largest response message accepted (both paths; default 4 MiB).
            #[must_use]
            pub fn max_decoding_message_size(mut self, limit: usize) -> Self {
                self.inner = self.inner.max_decoding_message_size(limit);
                self.typed = self.typed.max_decoding_message_size(limit);
                self
            }

            /// The largest request message sent (both paths; default no limit).
            #[must_use]
            pub fn max_encoding_message_size(mut self, limit: usize) -> Self {
                self.inner = self.inner.max_encoding_message_size(limit);
                self.typed = self.typed.max_encoding_message_size(limit);
                self
            }

            /// Whether calls take the typed path (the transport is an in-process channel with
            /// this service registered typed).
            pub fn is_typed(&self) -> bool {
                self.typed.is_typed()
            }

            #(#methods)*
        }
    }
}
