//! tonic-reflection (a tokio-only service: it spawns its stream onto tokio and talks to it over
//! tokio's channels) registered on a spindle-grpc server, driven by tonic's reflection client
//! over the network: with spindle's tokio context on every worker (feature tokio-compat) it
//! answers `list` and `describe` as on tonic's own server.

use spindle_grpc::{Channel, Endpoint, Server};
use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
use tonic_reflection::pb::v1::{ServerReflectionRequest, ServerReflectionResponse};

const REFLECTION: &str = "grpc.reflection.v1.ServerReflection";

/// One request on the reflection stream, its one response.
async fn ask(
    client: &mut ServerReflectionClient<spindle_grpc::RemoteChannel>,
    request: MessageRequest,
) -> MessageResponse {
    let request = ServerReflectionRequest { host: String::new(), message_request: Some(request) };
    let mut replies = client
        .server_reflection_info(tokio_stream::iter(vec![request]))
        .await
        .unwrap_or_else(|s| panic!("the reflection call failed: {s}"))
        .into_inner();
    let reply: ServerReflectionResponse = replies.message().await.unwrap().expect("one reply");
    reply.message_response.expect("a message response")
}

#[test]
fn reflection_answers_list_and_describe_on_a_spindle_server() {
    let rt = spindle::Runtime::new().unwrap();
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(tonic_reflection::pb::v1::FILE_DESCRIPTOR_SET)
        .build_v1()
        .unwrap();
    let channel = Channel::new().with_handle(rt.handle()).add_service(reflection);
    let (listed, described) = rt.block_on(move || {
        let listener = spindle::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let serving = Server::new(channel).serve_tcp(listener).unwrap();
        let endpoint = Endpoint::new(format!("http://{}", serving.local_addr().unwrap())).unwrap();
        spindle::task::block_on(async move {
            let mut client = ServerReflectionClient::new(endpoint.connect().await.unwrap());
            let listed = ask(&mut client, MessageRequest::ListServices(String::new())).await;
            let described =
                ask(&mut client, MessageRequest::FileContainingSymbol(REFLECTION.to_owned())).await;
            (listed, described)
        })
    });
    let MessageResponse::ListServicesResponse(list) = listed else { panic!("not a list: {listed:?}") };
    let names: Vec<&str> = list.service.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, [REFLECTION]);
    let MessageResponse::FileDescriptorResponse(files) = described else {
        panic!("not a file descriptor: {described:?}")
    };
    assert!(!files.file_descriptor_proto.is_empty());
    let file = String::from_utf8_lossy(&files.file_descriptor_proto[0]);
    assert!(file.contains("ServerReflection"), "the descriptor names the service");
}
