# http suite, competitors crystal and crystal-mt: the standard library's HTTP::Server, one
# fiber per connection, keep-alive, answering every request with 200 OK,
# Content-Type: text/plain, "Hello, World!".
#
# Built twice: plain (one thread runs every fiber) and with -Dpreview_mt (CRYSTAL_WORKERS
# threads; new fibers are spread over them). Environment: PORT (listens on 127.0.0.1:$PORT).
# SIGTERM's default action ends the process.
require "http/server"

port = (ENV["PORT"]? || "8080").to_i

server = HTTP::Server.new do |context|
  context.response.content_type = "text/plain"
  context.response.print "Hello, World!"
end

server.bind_tcp "127.0.0.1", port
server.listen
