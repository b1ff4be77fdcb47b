//! The same tonic client code over spindle-grpc's in-process Channel and over tonic's own
//! transport on loopback TCP: only the channel changes.
//!
//! ```sh
//! cargo run -p spindle-grpc --example same_client
//! ```

use std::time::Duration;

use spindle_grpc_interop::pb::test_service_client::TestServiceClient;
use spindle_grpc_interop::pb::test_service_server::TestServiceServer;
use spindle_grpc_interop::pb::{ResponseParameters, SimpleRequest, StreamingOutputCallRequest};
use spindle_grpc_interop::Server;
use tonic::client::GrpcService;
use tonic::codegen::{Body, Bytes, StdError};

/// The client code: written once against any tonic transport.
async fn talk<T>(transport: T) -> Result<String, tonic::Status>
where
    T: GrpcService<tonic::body::Body>,
    T::Error: Into<StdError>,
    T::ResponseBody: Body<Data = Bytes> + Send + 'static,
    <T::ResponseBody as Body>::Error: Into<StdError> + Send,
{
    let mut client = TestServiceClient::new(transport);
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
    // In process: the server is registered on a spindle-grpc Channel; the client runs in a
    // fiber on a spindle worker, and each handler runs in its caller's call on that worker.
    let rt = spindle::Runtime::new()?;
    let server = Server::new(|d| Box::pin(spindle::time::sleep_future(d)));
    let channel = spindle_grpc::Channel::new().add_service(TestServiceServer::new(server));
    let in_process = rt.block_on(move || spindle::task::block_on(talk(channel)))?;
    println!("spindle-grpc in process: {in_process}");

    // Over the network: the same server type behind tonic's Server, the same client code on a
    // tonic::transport::Channel (tokio, HTTP/2, loopback TCP).
    let tokio = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let over_tcp = tokio.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let server = Server::new(|d| Box::pin(tokio::time::sleep(d)));
        let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(TestServiceServer::new(server))
                .serve_with_incoming(incoming),
        );
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))?.connect().await?;
        Ok::<_, Box<dyn std::error::Error>>(talk(channel).await?)
    })?;
    println!("tonic over TCP:          {over_tcp}");
    assert_eq!(in_process, over_tcp);
    Ok(())
}
