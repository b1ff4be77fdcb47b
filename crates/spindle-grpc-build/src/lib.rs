//! Build helper for [spindle-grpc]: generates tonic's client and server for each service of a
//! set of `.proto` files (with tonic's and prost's own generators, tonic-prost-build and
//! prost-build, unchanged) and, beside them, the **typed fast path**: a typed dispatch inside
//! tonic's server module, and a typed client module.
//!
//! Call it from `build.rs` instead of `tonic_prost_build`, with the same settings:
//!
//! ```no_run
//! // build.rs
//! fn main() -> std::io::Result<()> {
//!     spindle_grpc_build::configure()
//!         .bytes(".my.package") // any tonic-prost-build setting
//!         .compile_protos(&["proto/greeter.proto"], &["proto"])
//! }
//! ```
//!
//! For a service `Greeter` of package `my.package` the generated file (included with
//! `tonic::include_proto!("my.package")`) has, besides tonic's `greeter_client` and
//! `greeter_server` modules:
//!
//! - in `greeter_server`: `impl spindle_grpc::typed::TypedService for GreeterServer<T>`, so
//!   that `spindle_grpc::Channel::add_typed_service(GreeterServer::new(service))` registers the
//!   server's typed entry point (the server's `max_decoding_message_size` and
//!   `max_encoding_message_size` apply to it as tonic's codec would apply them);
//! - a module `greeter_typed` with `GreeterClient<T>`: tonic's client API (the same
//!   constructors, settings and methods; server-streaming and bidirectional methods answer a
//!   `spindle_grpc::typed::Streaming<R>` with tonic's `Streaming` methods). On a
//!   `spindle_grpc::Channel` where the service was registered typed, its calls move the
//!   `tonic::Request<M>` into the handler and the `tonic::Response<R>` back, never encoding;
//!   on any other transport they go through tonic's client, unchanged;
//! - `greeter_typed::METHODS`, the list of methods (name, kind, message types) by which the
//!   client and the server check that their types match.
//!
//! The crate that includes the generated code depends on `spindle-grpc`, `tonic` and `prost`.
//!
//! [spindle-grpc]: ../spindle_grpc/index.html

#![warn(missing_docs)]

mod generate;

/// The README's example, compiled as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

use std::io;
use std::path::{Path, PathBuf};

pub use prost_build;
pub use tonic_prost_build;

/// A [`Builder`] with tonic-prost-build's defaults (client, server and transport code).
pub fn configure() -> Builder {
    Builder::with_config(prost_build::Config::new())
}

/// Compiles `.proto` files with the default settings ([`configure`]).
pub fn compile_protos(proto: impl AsRef<Path>) -> io::Result<()> {
    let proto = proto.as_ref();
    let dir = proto.parent().ok_or_else(|| io::Error::other("the proto file has no parent directory"))?;
    configure().compile_protos(&[proto], &[dir])
}

/// The settings of tonic-prost-build's `Builder` (those that shape the generated code), and
/// the generation of the typed fast path beside it.
#[derive(Debug)]
pub struct Builder {
    tonic: tonic_prost_build::Builder,
    config: prost_build::Config,
    options: generate::Options,
    /// prost-build's `bytes` paths, accumulated.
    bytes: Vec<String>,
    emit_rerun_if_changed: bool,
}

impl Builder {
    /// A builder over a prost-build `Config` of your own (for settings this builder does not
    /// forward); the settings below are applied to it.
    pub fn with_config(config: prost_build::Config) -> Builder {
        Builder {
            tonic: tonic_prost_build::configure(),
            config,
            options: generate::Options::default(),
            bytes: Vec::new(),
            emit_rerun_if_changed: true,
        }
    }

    /// Generates the clients (tonic's and the typed one); default on.
    pub fn build_client(mut self, enable: bool) -> Self {
        self.tonic = self.tonic.build_client(enable);
        self.options.client = enable;
        self
    }

    /// Generates the servers (tonic's, with their typed entry); default on.
    pub fn build_server(mut self, enable: bool) -> Self {
        self.tonic = self.tonic.build_server(enable);
        self.options.server = enable;
        self
    }

    /// Generates tonic's transport code (`connect`); default on. spindle-grpc needs none.
    pub fn build_transport(mut self, enable: bool) -> Self {
        self.tonic = self.tonic.build_transport(enable);
        self
    }

    /// Where the generated files go (default `$OUT_DIR`).
    pub fn out_dir(mut self, out_dir: impl AsRef<Path>) -> Self {
        self.config.out_dir(out_dir.as_ref());
        self
    }

    /// prost-build's `extern_path`.
    pub fn extern_path(mut self, proto_path: impl AsRef<str>, rust_path: impl AsRef<str>) -> Self {
        self.config.extern_path(proto_path.as_ref(), rust_path.as_ref());
        self
    }

    /// prost-build's `field_attribute`.
    pub fn field_attribute(mut self, path: impl AsRef<str>, attribute: impl AsRef<str>) -> Self {
        self.config.field_attribute(path.as_ref(), attribute.as_ref());
        self
    }

    /// prost-build's `message_attribute`.
    pub fn message_attribute(mut self, path: impl AsRef<str>, attribute: impl AsRef<str>) -> Self {
        self.config.message_attribute(path.as_ref(), attribute.as_ref());
        self
    }

    /// prost-build's `enum_attribute`.
    pub fn enum_attribute(mut self, path: impl AsRef<str>, attribute: impl AsRef<str>) -> Self {
        self.config.enum_attribute(path.as_ref(), attribute.as_ref());
        self
    }

    /// prost-build's `type_attribute`.
    pub fn type_attribute(mut self, path: impl AsRef<str>, attribute: impl AsRef<str>) -> Self {
        self.config.type_attribute(path.as_ref(), attribute.as_ref());
        self
    }

    /// prost-build's `boxed`.
    pub fn boxed(mut self, path: impl AsRef<str>) -> Self {
        self.config.boxed(path.as_ref());
        self
    }

    /// prost-build's `btree_map`, for the given paths.
    pub fn btree_map(mut self, paths: &[&str]) -> Self {
        self.config.btree_map(paths);
        self
    }

    /// prost-build's `bytes`: these `bytes` fields as `bytes::Bytes` (add to earlier calls).
    pub fn bytes(mut self, path: impl AsRef<str>) -> Self {
        self.bytes.push(path.as_ref().to_string());
        self.config.bytes(&self.bytes);
        self
    }

    /// tonic-prost-build's `server_mod_attribute`.
    pub fn server_mod_attribute(mut self, path: impl AsRef<str>, attribute: impl AsRef<str>) -> Self {
        self.tonic = self.tonic.server_mod_attribute(path, attribute);
        self
    }

    /// tonic-prost-build's `server_attribute`.
    pub fn server_attribute(mut self, path: impl AsRef<str>, attribute: impl AsRef<str>) -> Self {
        self.tonic = self.tonic.server_attribute(path, attribute);
        self
    }

    /// tonic-prost-build's `trait_attribute`.
    pub fn trait_attribute(mut self, path: impl AsRef<str>, attribute: impl AsRef<str>) -> Self {
        self.tonic = self.tonic.trait_attribute(path, attribute);
        self
    }

    /// tonic-prost-build's `client_mod_attribute`.
    pub fn client_mod_attribute(mut self, path: impl AsRef<str>, attribute: impl AsRef<str>) -> Self {
        self.tonic = self.tonic.client_mod_attribute(path, attribute);
        self
    }

    /// tonic-prost-build's `client_attribute`.
    pub fn client_attribute(mut self, path: impl AsRef<str>, attribute: impl AsRef<str>) -> Self {
        self.tonic = self.tonic.client_attribute(path, attribute);
        self
    }

    /// tonic-prost-build's `proto_path`: where the generated modules find the messages
    /// (default `super`).
    pub fn proto_path(mut self, proto_path: impl AsRef<str>) -> Self {
        self.tonic = self.tonic.proto_path(proto_path.as_ref());
        self.options.proto_path = proto_path.as_ref().to_string();
        self
    }

    /// Compiles the well-known types instead of using `prost-types`'.
    pub fn compile_well_known_types(mut self, enable: bool) -> Self {
        self.tonic = self.tonic.compile_well_known_types(enable);
        if enable {
            self.config.compile_well_known_types();
        }
        self
    }

    /// prost-build's `file_descriptor_set_path`.
    pub fn file_descriptor_set_path(mut self, path: impl AsRef<Path>) -> Self {
        self.config.file_descriptor_set_path(path.as_ref());
        self
    }

    /// prost-build's `skip_protoc_run`.
    pub fn skip_protoc_run(mut self) -> Self {
        self.config.skip_protoc_run();
        self
    }

    /// prost-build's `protoc_arg`.
    pub fn protoc_arg(mut self, arg: impl AsRef<str>) -> Self {
        self.config.protoc_arg(arg.as_ref());
        self
    }

    /// prost-build's `include_file`.
    pub fn include_file(mut self, path: impl AsRef<Path>) -> Self {
        self.config.include_file(path.as_ref());
        self
    }

    /// tonic-prost-build's `disable_comments`.
    pub fn disable_comments<I, S>(mut self, paths: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.tonic = self.tonic.disable_comments(paths);
        self
    }

    /// tonic-prost-build's `use_arc_self`: the service trait's methods take `self: Arc<Self>`.
    pub fn use_arc_self(mut self, enable: bool) -> Self {
        self.tonic = self.tonic.use_arc_self(enable);
        self.options.use_arc_self = enable;
        self
    }

    /// tonic-prost-build's `generate_default_stubs`.
    pub fn generate_default_stubs(mut self, enable: bool) -> Self {
        self.tonic = self.tonic.generate_default_stubs(enable);
        self
    }

    /// tonic-prost-build's `codec_path` (the encoded path's codec; the typed path has none).
    pub fn codec_path(mut self, path: impl AsRef<str>) -> Self {
        self.tonic = self.tonic.codec_path(path);
        self
    }

    /// Prints `cargo:rerun-if-changed` for the proto files and include directories given to
    /// [`Builder::compile_protos`] (default on).
    pub fn emit_rerun_if_changed(mut self, enable: bool) -> Self {
        self.emit_rerun_if_changed = enable;
        self
    }

    /// Compiles `protos` (with `protoc`, found as prost-build finds it), searching `includes`.
    pub fn compile_protos<P: AsRef<Path>>(self, protos: &[P], includes: &[P]) -> io::Result<()> {
        if self.emit_rerun_if_changed {
            for path in protos.iter().chain(includes) {
                println!("cargo:rerun-if-changed={}", path.as_ref().display());
            }
        }
        let protos: Vec<PathBuf> = protos.iter().map(|p| p.as_ref().to_path_buf()).collect();
        let includes: Vec<PathBuf> = includes.iter().map(|p| p.as_ref().to_path_buf()).collect();
        self.into_config().compile_protos(&protos, &includes)
    }

    /// Compiles a file descriptor set (from `protox`, say: no `protoc` needed).
    pub fn compile_fds(self, fds: prost_types::FileDescriptorSet) -> io::Result<()> {
        self.into_config().compile_fds(fds)
    }

    fn into_config(self) -> prost_build::Config {
        // prost-build writes to $OUT_DIR unless `out_dir` says otherwise.
        let Builder { tonic, mut config, options, .. } = self;
        config.service_generator(Box::new(generate::Generator::new(tonic.service_generator(), options)));
        config
    }
}
