#include "model/node_call.h"

#include <cstring>
#include <type_traits>

namespace m2 {
namespace {

class Writer {
 public:
  template <typename T>
  void put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    append(&v, sizeof(T));
  }
  template <typename T>
  void put_vec(std::span<const T> v) {
    put<uint64_t>(v.size());
    append(v.data(), v.size_bytes());
  }
  void append(const void* p, size_t n) {
    const size_t at = out.size();
    out.resize(at + n);
    if (n) std::memcpy(out.data() + at, p, n);
  }
  std::vector<uint8_t> out;
};

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> b) : b_(b) {}
  template <typename T>
  Status get(T& v) {
    if (b_.size() - at_ < sizeof(T)) return truncated(sizeof(T));
    std::memcpy(&v, b_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return Status();
  }
  template <typename T>
  Status get_vec(std::vector<T>& v) {
    uint64_t n = 0;
    M2_RETURN_IF_ERROR(get(n));
    if (n > (b_.size() - at_) / sizeof(T)) return truncated(n * sizeof(T));
    v.resize(n);
    std::memcpy(v.data(), b_.data() + at_, n * sizeof(T));
    at_ += n * sizeof(T);
    return Status();
  }
  bool done() const { return at_ == b_.size(); }
  size_t at() const { return at_; }

 private:
  Status truncated(uint64_t want) const {
    return errorf("a node call of {} bytes ends at byte {}, where {} more were due", b_.size(), at_, want);
  }
  std::span<const uint8_t> b_;
  size_t at_ = 0;
};

void put_shape(Writer& w, const KvCacheShape& s) {
  w.put<int32_t>(s.num_layers), w.put<int32_t>(s.num_kv_heads), w.put<int32_t>(s.head_dim);
  w.put<int32_t>(s.block_size), w.put<int64_t>(s.num_blocks), w.put<uint8_t>(static_cast<uint8_t>(s.dtype));
}

Status get_shape(Reader& r, KvCacheShape& s) {
  uint8_t dtype = 0;
  M2_RETURN_IF_ERROR(r.get(s.num_layers));
  M2_RETURN_IF_ERROR(r.get(s.num_kv_heads));
  M2_RETURN_IF_ERROR(r.get(s.head_dim));
  M2_RETURN_IF_ERROR(r.get(s.block_size));
  M2_RETURN_IF_ERROR(r.get(s.num_blocks));
  M2_RETURN_IF_ERROR(r.get(dtype));
  s.dtype = static_cast<DType>(dtype);
  return Status();
}

void put_step(Writer& w, const StepInput& in) {
  w.put_vec<int32_t>(in.tokens), w.put_vec<int32_t>(in.positions), w.put_vec<int64_t>(in.slots);
  w.put_vec<int64_t>(in.logit_rows);
  w.put<uint8_t>(in.capture_routing), w.put_vec<int32_t>(in.forced_experts);
  w.put<uint64_t>(in.seqs.size());
  for (const SeqSlice& s : in.seqs) {
    w.put<int64_t>(s.first_row), w.put<int64_t>(s.num_rows), w.put<int64_t>(s.context_len);
    w.put_vec<int32_t>(s.block_table);
  }
}

}  // namespace

std::vector<uint8_t> encode_node_call(const NodeCall& c) {
  Writer w;
  w.put<uint8_t>(static_cast<uint8_t>(c.kind));
  switch (c.kind) {
    case NodeCall::Kind::kReserve:
      w.put<int64_t>(c.limits.max_tokens), w.put<int64_t>(c.limits.max_seqs);
      w.put<int64_t>(c.limits.max_logit_rows), w.put<int64_t>(c.limits.max_context);
      put_shape(w, c.limits.cache);
      break;
    case NodeCall::Kind::kMakeKvCache:
      w.put<int32_t>(c.block_size), w.put<int64_t>(c.num_blocks), w.put<uint8_t>(static_cast<uint8_t>(c.dtype));
      break;
    case NodeCall::Kind::kForward: put_step(w, c.input); break;
  }
  return std::move(w.out);
}

std::vector<uint8_t> encode_forward_call(const StepInput& input) {
  Writer w;
  w.put<uint8_t>(static_cast<uint8_t>(NodeCall::Kind::kForward));
  put_step(w, input);
  return std::move(w.out);
}

Result<NodeCall> decode_node_call(std::span<const uint8_t> bytes) {
  Reader r(bytes);
  NodeCall c;
  uint8_t kind = 0;
  M2_RETURN_IF_ERROR(r.get(kind));
  c.kind = static_cast<NodeCall::Kind>(kind);
  switch (c.kind) {
    case NodeCall::Kind::kReserve:
      M2_RETURN_IF_ERROR(r.get(c.limits.max_tokens));
      M2_RETURN_IF_ERROR(r.get(c.limits.max_seqs));
      M2_RETURN_IF_ERROR(r.get(c.limits.max_logit_rows));
      M2_RETURN_IF_ERROR(r.get(c.limits.max_context));
      M2_RETURN_IF_ERROR(get_shape(r, c.limits.cache));
      break;
    case NodeCall::Kind::kMakeKvCache: {
      uint8_t dtype = 0;
      M2_RETURN_IF_ERROR(r.get(c.block_size));
      M2_RETURN_IF_ERROR(r.get(c.num_blocks));
      M2_RETURN_IF_ERROR(r.get(dtype));
      c.dtype = static_cast<DType>(dtype);
      break;
    }
    case NodeCall::Kind::kForward: {
      StepInput& in = c.input;
      uint8_t capture = 0;
      uint64_t seqs = 0;
      M2_RETURN_IF_ERROR(r.get_vec(in.tokens));
      M2_RETURN_IF_ERROR(r.get_vec(in.positions));
      M2_RETURN_IF_ERROR(r.get_vec(in.slots));
      M2_RETURN_IF_ERROR(r.get_vec(in.logit_rows));
      M2_RETURN_IF_ERROR(r.get(capture));
      M2_RETURN_IF_ERROR(r.get_vec(in.forced_experts));
      M2_RETURN_IF_ERROR(r.get(seqs));
      if (seqs > bytes.size()) return errorf("a node call names {} sequences in {} bytes", seqs, bytes.size());
      in.capture_routing = capture != 0;
      c.tables.resize(seqs);
      in.seqs.resize(seqs);
      for (uint64_t i = 0; i < seqs; ++i) {
        SeqSlice& s = in.seqs[i];
        M2_RETURN_IF_ERROR(r.get(s.first_row));
        M2_RETURN_IF_ERROR(r.get(s.num_rows));
        M2_RETURN_IF_ERROR(r.get(s.context_len));
        M2_RETURN_IF_ERROR(r.get_vec(c.tables[i]));
        s.block_table = c.tables[i];
      }
      break;
    }
    default: return errorf("a node call of unknown kind {} (byte 0)", kind);
  }
  if (!r.done()) return errorf("a node call of {} bytes has {} bytes left over", bytes.size(), bytes.size() - r.at());
  return c;
}

}  // namespace m2
