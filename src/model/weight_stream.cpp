#include "model/weight_stream.h"

#include <algorithm>
#include <optional>

#include "util/log.h"

namespace m2 {
namespace {

constexpr double kGiB = 1073741824.0;

using Locations = std::vector<std::optional<CheckpointLocation>>;

Locations locate_all(const Checkpoint* checkpoint, const std::vector<WeightCopy>& copies) {
  Locations locs(copies.size());
  if (checkpoint)
    for (size_t i = 0; i < copies.size(); ++i) locs[i] = checkpoint->locate(copies[i].src);
  return locs;
}

std::vector<size_t> order_of(const Locations& locs) {
  std::vector<size_t> order(locs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const auto &la = locs[a], &lb = locs[b];
    if (la.has_value() != lb.has_value()) return la.has_value();
    if (!la) return false;
    return la->file != lb->file ? la->file < lb->file : la->offset < lb->offset;
  });
  return order;
}

// The tensor of `file` whose bytes hold `offset`, for messages.
std::string tensor_at(const SafetensorsFile& file, uint64_t offset) {
  for (const auto& [name, e] : file.entries())
    if (offset >= e.offset && offset < e.offset + e.nbytes) return name;
  return "?";
}

}  // namespace

std::vector<size_t> weight_stream_order(const Checkpoint* checkpoint, const std::vector<WeightCopy>& copies) {
  return order_of(locate_all(checkpoint, copies));
}

Status stream_weights(const Checkpoint* checkpoint, const std::vector<WeightCopy>& copies,
                      const std::function<Status(const WeightCopy&)>& copy, const WeightStreamOptions& options) {
  const Locations locs = locate_all(checkpoint, copies);
  const std::vector<size_t> order = order_of(locs);
  uint64_t total = 0;
  size_t num_shards = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    total += copies[order[k]].bytes;
    const auto& loc = locs[order[k]];
    if (loc && (k == 0 || !locs[order[k - 1]] || locs[order[k - 1]]->file != loc->file)) ++num_shards;
  }
  // A load of less than a GiB is over before a progress display is of use.
  const bool big = total >= (1ull << 30);
  ProgressBar bar(options.label, static_cast<int64_t>(total), ProgressUnit::bytes(),
                  big ? options.progress : ProgressBar::Style::kOff);

  // The shard being streamed: how far it has been read ahead and released,
  // and where its last copy ends (nothing past it is read ahead).
  const MappedFile* shard = nullptr;
  size_t shard_index = 0, shard_number = 0;
  uint64_t read_to = 0, released_to = 0, shard_end = 0;
  auto leave_shard = [&] {
    if (shard) shard->release(released_to, shard->size() - released_to);
    shard = nullptr;
  };
  // Copies larger than release_bytes (the embedding and lm_head: 1.2 GB
  // each) go in pieces, so that what one piece faulted in is released
  // before the next is read.
  const uint64_t piece_bytes = std::max<uint64_t>(options.release_bytes, 1);
  uint64_t done = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    const WeightCopy& c = copies[order[k]];
    const auto& loc = locs[order[k]];
    if (!loc) {
      leave_shard();
    } else if (!shard || loc->file != shard_index) {
      leave_shard();
      shard_index = loc->file, ++shard_number;
      shard = &checkpoint->file(shard_index).mapped();
      read_to = loc->offset, released_to = 0, shard_end = 0;
      for (size_t j = k; j < order.size() && locs[order[j]] && locs[order[j]]->file == shard_index; ++j)
        shard_end = std::max(shard_end, locs[order[j]]->offset + copies[order[j]].span());
    }
    // (A strided copy's pieces are whole rows: `step` packed bytes, `src_step` of the view.)
    const uint64_t rows_a_piece = c.strided() ? std::max<uint64_t>(piece_bytes / c.src_pitch, 1) : 0;
    const uint64_t step = c.strided() ? rows_a_piece * c.row_bytes : piece_bytes;
    const uint64_t src_step = c.strided() ? rows_a_piece * c.src_pitch : piece_bytes;
    for (uint64_t off = 0, src_off = 0; off < c.bytes; off += step, src_off += src_step) {
      WeightCopy split;
      if (c.bytes > step)
        split = {static_cast<const uint8_t*>(c.src) + src_off, std::min(step, c.bytes - off),
                 static_cast<uint8_t*>(c.dst) + off, c.what, c.row_bytes, c.src_pitch};
      const WeightCopy& piece = c.bytes > step ? split : c;
      if (!loc) {
        M2_RETURN_IF_ERROR(copy(piece));
      } else {
        const uint64_t begin = loc->offset + src_off, end = begin + piece.span();
        // Keep the next window of the shard on its way from the disk; asked
        // for half a window at a time to keep the system calls few.
        if (read_to < std::min(end + options.readahead_bytes / 2, shard_end)) {
          const uint64_t from = std::max(read_to, begin);
          read_to = std::min(end + options.readahead_bytes, shard_end);
          shard->prefetch(from, read_to - from);
        }
        Status s = copy(piece);
        if (!s.ok()) {
          const SafetensorsFile& f = checkpoint->file(shard_index);
          return s.with_context(fmt::format("{}: tensor '{}' (byte {})", f.path(), tensor_at(f, begin), begin));
        }
        if (end > released_to && end - released_to >= options.release_bytes)
          released_to = shard->release(released_to, end - released_to);
      }
      done += piece.bytes;
      bar.update(static_cast<int64_t>(done),
                 num_shards > 1 && shard ? fmt::format("shard {}/{}", shard_number, num_shards) : std::string());
    }
  }
  leave_shard();
  bar.finish();
  const double s = bar.elapsed_s();
  const std::string from =
      num_shards ? fmt::format(" from {} shard{}", num_shards, num_shards > 1 ? "s" : "") : std::string();
  const std::string summary = fmt::format("{}: {:.2f} GiB{} in {:.1f} s ({:.2f} GiB/s)", options.label,
                                          total / kGiB, from, s, total / kGiB / std::max(s, 1e-9));
  if (big) {
    log_info("{}", summary);
  } else {
    log_debug("{}", summary);
  }
  return Status();
}

}  // namespace m2
