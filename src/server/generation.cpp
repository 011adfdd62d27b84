#include "server/generation.h"

#include "server/access_log.h"
#include "util/log.h"

namespace m2::server {
namespace {

const char* finish_label(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAbort: return "abort";
    default: return "error";
  }
}

int unfinished(const std::vector<int>& remaining) {
  int n = 0;
  for (int r : remaining) n += std::max(r, 0);
  return n;
}

}  // namespace

Generation::Generation(ServerContext& ctx, std::shared_ptr<ResponseWriter> writer, const HttpRequest& request,
                       ApiFlavor flavor, std::string id, bool stream)
    : ctx_(ctx),
      writer_(std::move(writer)),
      flavor_(flavor),
      id_(std::move(id)),
      stream_(stream),
      created_(std::chrono::duration_cast<std::chrono::seconds>(
                   std::chrono::system_clock::now().time_since_epoch()).count()),
      route_(request.path),
      method_(request.method),
      remote_(request.remote),
      request_id_(request.request_id),
      start_(Clock::now()) {}

void Generation::start(std::vector<EngineJob> jobs) {
  auto shared = std::make_shared<std::vector<EngineJob>>(std::move(jobs));
  writer_->post([self = shared_from_this(), shared] { self->start_on_strand(std::move(*shared)); });
}

void Generation::start_on_strand(std::vector<EngineJob> jobs) {
  if (ctx_.draining.load()) {
    ApiError e;
    e.status = 503;
    e.message = "the server is shutting down";
    e.retry_after_s = ctx_.options.retry_after_s;
    return respond_error(e);
  }
  auto self = shared_from_this();
  for (size_t i = 0; i < jobs.size(); ++i) {
    job_ids_.push_back(jobs.size() == 1 ? id_ : id_ + "-" + std::to_string(i));
    remaining_.push_back(jobs[i].params.n);
  }
  prompt_counted_.assign(jobs.size(), false);
  jobs_left_ = jobs.size();
  for (size_t i = 0; i < jobs.size(); ++i) {
    LoopRequest r;
    r.id = job_ids_[i];
    r.prompt = std::move(jobs[i].prompt);
    r.params = std::move(jobs[i].params);
    std::weak_ptr<ResponseWriter> writer = writer_;
    r.sink = [self, i, writer](const Status& error, std::vector<RequestOutput>&& outputs) {
      const auto at = Clock::now();
      if (auto w = writer.lock()) {
        w->post([self, i, error, outs = std::move(outputs), at]() mutable { self->deliver(i, error, outs, at); });
      }
    };
    const Admission a = ctx_.loop->submit(std::move(r));
    if (a != Admission::kAccepted) {
      for (size_t k = 0; k < i; ++k) ctx_.loop->abort(job_ids_[k]);
      failed_ = true;
      ApiError e;
      e.retry_after_s = ctx_.options.retry_after_s;
      if (a == Admission::kQueueFull) {
        e.status = 429;
        e.message = "the server's waiting queue is full; retry later";
      } else {
        e.status = 503;
        e.message = "the server is shutting down";
      }
      return respond_error(e);
    }
  }
  writer_->on_disconnect([self] { self->abort_all(); });
  writer_->on_backpressure([self](bool paused) { self->pause_all(paused); });
  on_admitted();
}

void Generation::deliver(size_t job, const Status& error, std::vector<RequestOutput>& outputs, Clock::time_point at) {
  count_tokens(job, outputs);
  if (failed_ || writer_->disconnected()) return;
  if (!error.ok()) {
    failed_ = true;
    for (int i = unfinished(remaining_); i > 0; --i) ctx_.metrics.count_finished("error");
    for (size_t k = 0; k < job_ids_.size(); ++k)
      if (k != job && remaining_[k] > 0) ctx_.loop->abort(job_ids_[k]);
    // An engine refusal of the request itself (rare: the server validates
    // first) is the client's; anything else is ours.
    ApiError e;
    e.status = ctx_.draining.load() ? 503 : 500;
    e.message = error.message();
    e.request_id = request_id_;
    return on_error(e);
  }
  // Inter-token latency as a request sees it: the time since its previous
  // tokens, shared by the tokens of the busiest completion in this batch.
  size_t step_tokens = 0;
  for (const RequestOutput& o : outputs) step_tokens = std::max(step_tokens, o.new_token_ids.size());
  if (have_token_ && step_tokens > 0)
    ctx_.metrics.observe_inter_token(std::chrono::duration<double>(at - last_token_).count(),
                                     static_cast<int64_t>(step_tokens));
  for (RequestOutput& o : outputs) {
    if (!o.new_token_ids.empty()) {
      if (!have_token_) first_token_ = at;
      have_token_ = true;
      last_token_ = at;
    }
    if (o.finished) {
      ctx_.metrics.count_finished(finish_label(o.finish_reason));
      if (--remaining_[job] == 0) --jobs_left_;
    }
    on_output(job, o);
  }
  if (jobs_left_ == 0) {
    const double e2e = std::chrono::duration<double>(at - start_).count();
    const double ttft = have_token_ ? std::chrono::duration<double>(first_token_ - start_).count() : -1;
    const double tpot = output_tokens_ > 1
                            ? std::chrono::duration<double>(last_token_ - first_token_).count() /
                                  static_cast<double>(output_tokens_ - 1)
                            : -1;
    ctx_.metrics.observe_request(ttft, tpot, e2e, prompt_tokens_, output_tokens_);
    on_complete();
  }
}

void Generation::count_tokens(size_t job, const std::vector<RequestOutput>& outputs) {
  int64_t prompt = 0, generated = 0;
  for (const RequestOutput& o : outputs) {
    generated += static_cast<int64_t>(o.new_token_ids.size());
    if (o.index == 0 && !prompt_counted_[job]) {  // the prompt is computed once for all n completions
      prompt_counted_[job] = true;
      prompt += o.num_prompt_tokens;
      cached_tokens_ += o.num_cached_tokens;
    }
  }
  prompt_tokens_ += prompt;
  output_tokens_ += generated;
  ctx_.metrics.count_tokens(prompt, generated);
}

void Generation::abort_all() {
  if (failed_) return;
  failed_ = true;
  for (int i = unfinished(remaining_); i > 0; --i) ctx_.metrics.count_finished("abort");
  for (size_t k = 0; k < job_ids_.size(); ++k)
    if (remaining_[k] > 0) ctx_.loop->abort(job_ids_[k]);
  log_done(499, "abort");  // nginx's "client closed request"
}

void Generation::pause_all(bool paused) {
  if (failed_) return;
  for (size_t k = 0; k < job_ids_.size(); ++k)
    if (remaining_[k] > 0) ctx_.loop->set_paused(job_ids_[k], paused);
}

void Generation::respond_error(const ApiError& error) {
  ApiError e = error;
  e.request_id = request_id_;
  writer_->respond(error_response(e, flavor_));
  log_done(error.status, "");
}

void Generation::respond_json(const OrderedJson& body, const std::string& finish_reason) {
  HttpResponse r;
  r.body = dump_json(body);
  writer_->respond(std::move(r));
  log_done(200, finish_reason);
}

void Generation::log_done(int status, const std::string& finish_reason) {
  if (logged_) return;
  logged_ = true;
  ctx_.metrics.count_request(route_, status);
  if (!ctx_.options.access_log) return;
  AccessRecord r;
  r.remote = remote_;
  r.method = method_;
  r.path = route_;
  r.request_id = id_;
  r.x_request_id = request_id_;
  r.status = status;
  r.stream = stream_;
  r.finish_reason = finish_reason;
  r.duration_ms = std::chrono::duration<double, std::milli>(Clock::now() - start_).count();
  if (have_token_) r.ttft_ms = std::chrono::duration<double, std::milli>(first_token_ - start_).count();
  r.prompt_tokens = prompt_tokens_;
  r.completion_tokens = output_tokens_;
  r.cached_tokens = cached_tokens_;
  log_access(r);
}

OrderedJson stop_reason_json(const RequestOutput& o) {
  if (!o.stop_string.empty()) return o.stop_string;
  if (o.stop_token_id >= 0) return o.stop_token_id;
  return nullptr;
}

}  // namespace m2::server
