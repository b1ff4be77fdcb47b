//! The same tonic client code in process and across the network, with no tokio runtime: the
//! URI picks the transport (`spindle_grpc::AnyChannel`): `inproc:` calls the services
//! registered on this process's `Channel`, `http://host:port` goes over HTTP/2 to a
//! `spindle_grpc::Server` (here serving that same channel on loopback).
//!
//! ```sh
//! cargo run -p spindle-grpc --example same_client
//! ```

use std::time::Duration;

use spindle_grpc::{AnyChannel, Channel};
use spindle_grpc_interop::pb::test_service_client::TestServiceClient;
use spindle_grpc_interop::pb::test_service_server::TestServiceServer;
use spindle_grpc_interop::pb::{ResponseParameters, SimpleRequest, StreamingOutputCallRequest};
use spindle_grpc_interop::Server;

/// The client code: written once, for whichever place the URI names.
async fn talk(uri: &str, local: &Channel) -> Result<String, Box<dyn std::error::Error>> {
    let mut client = TestServiceClient::new(AnyChannel::from_uri(uri, local)?);
    let mut request = tonic::Request::new(SimpleRequest { response_size: 42, ..Default::default() });
    request.set_timeout(Duration::from_secs(1));
    let unary = client.unary_call(request).await?.into_inner();
    let params = (1..=3).map(|size| ResponseParameters { size, ..Default::default() }).collect();
    let request = StreamingOutputCallRequest { response_parameters: params, ..Default::default() };
    let mut stream = client.streaming_output_call(request).await?.into_inner();
    let mut sizes = Vec::new();
    while let Some(msg) = stream.message().await? {
        sizes.push(msg.payload.map_or(0, |p| p.body.len()));
    }
    Ok(format!("unary: {} bytes, stream: {sizes:?}", unary.payload.map_or(0, |p| p.body.len())))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rt = spindle::Runtime::new()?;
    let (in_process, over_tcp) = rt.block_on(|| {
        // The services of this process, on its in-process channel.
        let server = Server::new(|d| Box::pin(spindle::time::sleep_future(d)));
        let local = Channel::new().add_service(TestServiceServer::new(server));
        // The same channel served over HTTP/2 on loopback (as another machine would serve it).
        let listener = spindle::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
        let serving =
            spindle_grpc::Server::new(local.clone()).serve_tcp(listener).map_err(|e| e.to_string())?;
        let remote_uri = format!("http://{}", serving.local_addr().expect("a TCP address"));
        let in_process = spindle::task::block_on(talk("inproc:", &local)).map_err(|e| e.to_string())?;
        let over_tcp = spindle::task::block_on(talk(&remote_uri, &local)).map_err(|e| e.to_string())?;
        serving.shutdown(Duration::from_secs(1));
        Ok::<_, String>((in_process, over_tcp))
    })?;
    println!("inproc:          {in_process}");
    println!("http (loopback): {over_tcp}");
    assert_eq!(in_process, over_tcp);
    Ok(())
}
