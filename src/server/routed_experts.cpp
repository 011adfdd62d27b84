#include "server/routed_experts.h"

#include "server/json_fields.h"

#include <array>
#include <optional>

namespace m2::server {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int id_bytes(const ServerContext& ctx) { return ctx.num_experts <= 256 ? 1 : 2; }

}  // namespace

std::string base64_encode(std::string_view in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const uint32_t v = static_cast<uint8_t>(in[i]) << 16 | static_cast<uint8_t>(in[i + 1]) << 8 | static_cast<uint8_t>(in[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out.push_back(kAlphabet[(v >> s) & 63]);
  }
  if (i < in.size()) {
    uint32_t v = static_cast<uint8_t>(in[i]) << 16;
    if (i + 1 < in.size()) v |= static_cast<uint8_t>(in[i + 1]) << 8;
    out.push_back(kAlphabet[(v >> 18) & 63]);
    out.push_back(kAlphabet[(v >> 12) & 63]);
    out.push_back(i + 1 < in.size() ? kAlphabet[(v >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

std::optional<std::string> base64_decode(std::string_view in) {
  std::array<int, 256> value;
  value.fill(-1);
  for (int c = 0; c < 64; ++c) value[static_cast<uint8_t>(kAlphabet[c])] = c;
  if (in.size() % 4 != 0) return std::nullopt;
  std::string out;
  out.reserve(in.size() / 4 * 3);
  for (size_t i = 0; i < in.size(); i += 4) {
    const bool last = i + 4 == in.size();
    int pad = 0;
    uint32_t v = 0;
    for (int j = 0; j < 4; ++j) {
      const char ch = in[i + j];
      if (ch == '=' && last && j >= 2) {
        ++pad;
        v <<= 6;
        continue;
      }
      if (pad > 0) return std::nullopt;  // data after padding
      const int d = value[static_cast<uint8_t>(ch)];
      if (d < 0) return std::nullopt;
      v = v << 6 | static_cast<uint32_t>(d);
    }
    out.push_back(static_cast<char>(v >> 16));
    if (pad < 2) out.push_back(static_cast<char>(v >> 8 & 0xFF));
    if (pad < 1) out.push_back(static_cast<char>(v & 0xFF));
  }
  return out;
}

Result<RoutingFields> parse_routing_fields(const OrderedJson& body, const ServerContext& ctx) {
  RoutingFields f;
  if (auto it = body.find("return_routed_experts"); it != body.end() && !it->is_null()) {
    if (!it->is_boolean()) return errorf("return_routed_experts must be a boolean, got {}", json_type(*it));
    f.return_routed_experts = it->get<bool>();
  }
  auto it = body.find("routing_replay");
  if (it == body.end() || it->is_null()) return f;
  const OrderedJson& r = *it;
  if (!r.is_object()) return errorf("routing_replay must be an object {{dtype, shape, data}}, got {}", json_type(r));
  const int L = ctx.num_layers, k = ctx.top_k, bytes = id_bytes(ctx);
  const char* want_dtype = bytes == 1 ? "uint8" : "uint16";
  auto dtype = r.find("dtype");
  if (dtype == r.end() || !dtype->is_string() || dtype->get<std::string>() != want_dtype)
    return errorf("routing_replay.dtype must be \"{}\" for a model of {} experts", want_dtype, ctx.num_experts);
  if (auto enc = r.find("encoding"); enc != r.end() && !(enc->is_string() && enc->get<std::string>() == "base64"))
    return errorf("routing_replay.encoding must be \"base64\"");
  auto shape = r.find("shape");
  if (shape == r.end() || !shape->is_array() || shape->size() != 3 || !(*shape)[0].is_number_integer() ||
      !(*shape)[1].is_number_integer() || !(*shape)[2].is_number_integer())
    return errorf("routing_replay.shape must be [positions, layers, top_k] (3 integers)");
  const int64_t rows = (*shape)[0].get<int64_t>();
  if (rows < 1 || (*shape)[1].get<int64_t>() != L || (*shape)[2].get<int64_t>() != k)
    return errorf("routing_replay.shape must be [positions >= 1, {}, {}] for this model, got {}", L, k, shape->dump());
  auto data = r.find("data");
  if (data == r.end() || !data->is_string()) return errorf("routing_replay.data must be a base64 string");
  const std::optional<std::string> raw = base64_decode(data->get<std::string>());
  if (!raw) return errorf("routing_replay.data is not valid base64");
  const int64_t count = rows * L * k;
  if (static_cast<int64_t>(raw->size()) != count * bytes)
    return errorf("routing_replay.data holds {} bytes but shape {} of {} needs {}", raw->size(), shape->dump(), want_dtype,
                  count * bytes);
  auto ids = std::make_shared<std::vector<int32_t>>(static_cast<size_t>(count));
  const auto* p = reinterpret_cast<const uint8_t*>(raw->data());
  for (int64_t i = 0; i < count; ++i) (*ids)[i] = bytes == 1 ? p[i] : p[2 * i] | p[2 * i + 1] << 8;
  for (int64_t row = 0; row < rows * L; ++row) {
    const int32_t* e = ids->data() + row * k;
    for (int j = 0; j < k; ++j) {
      if (e[j] >= ctx.num_experts)
        return errorf("routing_replay: position {} layer {}: expert id {} outside [0, {})", row / L, row % L, e[j],
                      ctx.num_experts);
      for (int m = 0; m < j; ++m)
        if (e[m] == e[j]) return errorf("routing_replay: position {} layer {}: expert {} given twice", row / L, row % L, e[j]);
    }
  }
  f.replay = std::move(ids);
  f.replay_rows = rows;
  return f;
}

Status apply_routing_fields(const RoutingFields& f, int64_t prompt_tokens, SamplingParams* params) {
  params->return_routed_experts = f.return_routed_experts;
  if (!f.replay) return Status();
  if (f.replay_rows > prompt_tokens)
    return errorf("routing_replay covers {} positions but the prompt has {} tokens", f.replay_rows, prompt_tokens);
  params->routing_replay = f.replay;
  return Status();
}

OrderedJson routed_experts_json(std::span<const int32_t> ids, const ServerContext& ctx) {
  const int L = ctx.num_layers, k = ctx.top_k, bytes = id_bytes(ctx);
  std::string raw;
  raw.reserve(ids.size() * bytes);
  for (int32_t id : ids) {
    raw.push_back(static_cast<char>(id & 0xFF));
    if (bytes == 2) raw.push_back(static_cast<char>(id >> 8 & 0xFF));
  }
  const int64_t rows = L * k > 0 ? static_cast<int64_t>(ids.size()) / (L * k) : 0;
  return {{"encoding", "base64"},
          {"dtype", bytes == 1 ? "uint8" : "uint16"},
          {"shape", {rows, L, k}},
          {"data", base64_encode(raw)}};
}

}  // namespace m2::server
