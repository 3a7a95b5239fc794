// SPDX-License-Identifier: MIT
// HttpServer's /v1/embeddings handler (the route is in http_server.cc): the body parsed by
// embeddings_api.h, the vectors computed by Scheduler::embed on the scheduler's thread between
// generation steps.
#include <httplib.h>

#include "server/http_server.h"

namespace mb::server {

using nlohmann::json;

json HttpServer::handle_embeddings(const httplib::Request& req) {
  // Not counted in the generation requests' counters (the metrics say what they count).
  if (draining_.load()) throw ApiError(503, "server_error", "the server is shutting down", "shutting_down");
  if (model_.embeddings.d_model == 0) throw invalid_request("this server does not serve embeddings");
  EmbeddingsLimits limits;
  limits.max_input_tokens = model_.max_context;
  const EmbeddingsRequest request =
      parse_embeddings_request(req.body, model_.embeddings, limits, options_.model_id);
  // Counted while it runs, so drain() waits for it.
  struct InFlight {
    HttpServer& server;
    explicit InFlight(HttpServer& s) : server(s) {
      std::lock_guard lock(server.mutex_);
      ++server.in_flight_;
    }
    ~InFlight() {
      std::lock_guard lock(server.mutex_);
      --server.in_flight_;
      server.idle_.notify_all();
    }
  } in_flight(*this);
  EmbedOptions embed;
  embed.pooling = model_.pooling;
  const std::vector<std::vector<float>> vectors = model_.scheduler->embed(request.inputs, embed);
  return embeddings_response(request, vectors);
}

}  // namespace mb::server
