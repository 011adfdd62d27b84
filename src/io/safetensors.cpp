#include "io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>

#include "util/json.h"

namespace m2 {
namespace {

// Parses the header with duplicate-key detection at the top level (nlohmann
// would silently keep the last duplicate).
Result<Json> parse_header_json(std::string_view header, const std::string& path) {
  std::set<std::string> seen;
  std::string duplicate;
  Json::parser_callback_t cb = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (depth == 1 && event == Json::parse_event_t::key) {
      const std::string& k = parsed.get_ref<const std::string&>();
      if (!seen.insert(k).second && duplicate.empty()) duplicate = k;
    }
    return true;
  };
  Json j;
  try {
    j = Json::parse(header.begin(), header.end(), cb);
  } catch (const Json::parse_error& e) {
    return errorf("{}: header is not valid JSON (byte {} of the header, file offset {}): {}", path,
                  e.byte, e.byte + 8, e.what());
  } catch (const Json::exception& e) {
    // out_of_range for a number no integer or double holds (found by
    // tests/fuzz/fuzz_safetensors.cpp: it escaped, and ended the process).
    return errorf("{}: header holds JSON that cannot be read: {}", path, json_error_text(e));
  }
  if (!duplicate.empty()) return errorf("{}: tensor '{}' appears twice in the header", path, duplicate);
  return j;
}

}  // namespace

Status parse_safetensors_header(std::string_view header, uint64_t data_size, uint64_t data_start,
                                const std::string& path,
                                std::map<std::string, SafetensorsEntry>* entries,
                                std::map<std::string, std::string>* metadata) {
  M2_ASSIGN_OR_RETURN(Json j, parse_header_json(header, path));
  if (!j.is_object()) return errorf("{}: header is a JSON {}, expected an object", path, json_type_name(j));

  std::vector<const SafetensorsEntry*> by_offset;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& name = it.key();
    const Json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) return errorf("{}: __metadata__ is a {}, expected an object", path, json_type_name(v));
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string())
          return errorf("{}: __metadata__['{}'] is a {}, expected a string", path, m.key(), json_type_name(m.value()));
        (*metadata)[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string where = fmt::format("{}: tensor '{}'", path, name);
    if (!v.is_object()) return errorf("{}: entry is a {}, expected an object", where, json_type_name(v));
    auto dt = v.find("dtype");
    auto sh = v.find("shape");
    auto off = v.find("data_offsets");
    if (dt == v.end() || !dt->is_string()) return errorf("{}: missing or non-string 'dtype'", where);
    auto dtype = dtype_from_name(dt->get<std::string>());
    if (!dtype)
      return errorf("{}: unsupported dtype '{}' (supported: F32, BF16, F16, F8_E4M3, I32, I64)", where,
                    dt->get<std::string>());
    if (sh == v.end() || !sh->is_array()) return errorf("{}: missing or non-array 'shape'", where);
    if (sh->size() > static_cast<size_t>(kMaxDims))
      return errorf("{}: {} dimensions, at most {} supported", where, sh->size(), kMaxDims);
    SafetensorsEntry e;
    e.name = name;
    e.dtype = *dtype;
    uint64_t numel = 1;
    for (size_t i = 0; i < sh->size(); ++i) {
      const Json& d = (*sh)[i];
      if (!d.is_number_unsigned() && !(d.is_number_integer() && d.get<int64_t>() >= 0))
        return errorf("{}: shape[{}] is not a non-negative integer", where, i);
      const uint64_t dim = d.get<uint64_t>();
      if (dim > (1ull << 40) || (dim != 0 && numel > std::numeric_limits<uint64_t>::max() / 8 / dim))
        return errorf("{}: shape {} is too large", where, sh->dump());
      numel *= dim;
      e.shape.dims[e.shape.ndim++] = static_cast<int64_t>(dim);
    }
    if (off == v.end() || !off->is_array() || off->size() != 2)
      return errorf("{}: 'data_offsets' must be an array of two integers", where);
    for (const Json& o : *off) {
      if (!o.is_number_unsigned() && !(o.is_number_integer() && o.get<int64_t>() >= 0))
        return errorf("{}: 'data_offsets' {} holds a negative or non-integer value", where, off->dump());
    }
    const uint64_t b = (*off)[0].get<uint64_t>();
    const uint64_t end = (*off)[1].get<uint64_t>();
    if (end < b) return errorf("{}: data_offsets [{}, {}] end before they begin", where, b, end);
    if (end > data_size)
      return errorf("{}: data_offsets [{}, {}] run past the end of the data area ({} bytes; file truncated?)",
                    where, b, end, data_size);
    e.nbytes = end - b;
    const uint64_t expect = numel * dtype_size(e.dtype);
    if (e.nbytes != expect)
      return errorf("{}: holds {} bytes but shape {} x {} needs {} bytes", where, e.nbytes,
                    e.shape.str(), dtype_name(e.dtype), expect);
    e.offset = data_start + b;
    auto [pos, inserted] = entries->emplace(name, std::move(e));
    by_offset.push_back(&pos->second);
  }

  // Tensors must tile the data area exactly: no overlap, no gap, no trailing bytes.
  std::sort(by_offset.begin(), by_offset.end(), [](const SafetensorsEntry* a, const SafetensorsEntry* b) {
    return a->offset != b->offset ? a->offset < b->offset : a->nbytes < b->nbytes;
  });
  uint64_t cursor = data_start;
  const SafetensorsEntry* prev = nullptr;
  for (const SafetensorsEntry* e : by_offset) {
    if (e->offset < cursor)
      return errorf("{}: tensor '{}' (bytes {}..{} of the data area) overlaps tensor '{}'", path, e->name,
                    e->offset - data_start, e->offset - data_start + e->nbytes, prev ? prev->name : "?");
    if (e->offset > cursor)
      return errorf("{}: {} unused bytes before tensor '{}' at data offset {}", path, e->offset - cursor,
                    e->name, e->offset - data_start);
    cursor = e->offset + e->nbytes;
    prev = e;
  }
  if (cursor != data_start + data_size)
    return errorf("{}: {} trailing bytes after the last tensor (data area is {} bytes)", path,
                  data_start + data_size - cursor, data_size);
  return Status();
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(const std::string& path) {
  M2_ASSIGN_OR_RETURN(auto mapped, MappedFile::open(path));
  const uint64_t size = mapped->size();
  if (size < 8) return errorf("{}: {} bytes, too short for the 8-byte header length", path, size);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | mapped->data()[i];
  if (n > kMaxHeaderBytes) return errorf("{}: header length {} exceeds the {}-byte limit", path, n, kMaxHeaderBytes);
  if (n > size - 8)
    return errorf("{}: header length {} exceeds the {} bytes after the length field (file truncated?)", path, n,
                  size - 8);
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  const std::string_view header(reinterpret_cast<const char*>(mapped->data() + 8), n);
  M2_RETURN_IF_ERROR(parse_safetensors_header(header, size - 8 - n, 8 + n, path, &f->entries_, &f->metadata_));
  f->file_ = std::move(mapped);
  return f;
}

const SafetensorsEntry* SafetensorsFile::find(const std::string& name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second;
}

TensorView SafetensorsFile::view(const SafetensorsEntry& e) const {
  TensorView v;
  v.dtype = e.dtype;
  v.shape = e.shape;
  v.data = file_->data() + e.offset;
  return v;
}

// ---- Checkpoint -------------------------------------------------------------

Result<std::unique_ptr<Checkpoint>> Checkpoint::open(const std::string& dir) {
  namespace fs = std::filesystem;
  std::unique_ptr<Checkpoint> ck(new Checkpoint());
  ck->dir_ = dir;
  const fs::path index_path = fs::path(dir) / "model.safetensors.index.json";
  const fs::path single_path = fs::path(dir) / "model.safetensors";
  std::error_code ec;
  if (fs::exists(index_path, ec)) {
    M2_ASSIGN_OR_RETURN(Json index, read_json_file(index_path.string()));
    const std::string ip = index_path.string();
    if (!index.is_object()) return errorf("{}: expected a JSON object", ip);
    auto wm = index.find("weight_map");
    if (wm == index.end() || !wm->is_object()) return errorf("{}: missing object 'weight_map'", ip);
    std::map<std::string, size_t> file_ids;     // in name order: the shards' order
    std::map<std::string, std::string> listed;  // tensor -> file
    for (auto it = wm->begin(); it != wm->end(); ++it) {
      if (!it.value().is_string())
        return errorf("{}: weight_map['{}'] is a {}, expected a file name", ip, it.key(), json_type_name(it.value()));
      const std::string file = it.value().get<std::string>();
      if (file.empty() || file.find('/') != std::string::npos || file.find('\\') != std::string::npos ||
          file == "." || file == "..")
        return errorf("{}: weight_map['{}'] names '{}', which is not a plain file name in the checkpoint directory",
                      ip, it.key(), file);
      listed[it.key()] = file;
      file_ids[file] = 0;
    }
    for (auto& [file, id] : file_ids) {
      M2_ASSIGN_OR_RETURN(auto sf, SafetensorsFile::open((fs::path(dir) / file).string()));
      id = ck->files_.size();
      ck->files_.push_back(std::move(sf));
    }
    for (const auto& [name, file] : listed) {
      const size_t fid = file_ids[file];
      const SafetensorsEntry* e = ck->files_[fid]->find(name);
      if (!e) return errorf("{}: tensor '{}' is listed in the index for {} but that file does not hold it", ip, name, file);
      ck->index_[name] = {fid, e};
    }
    for (const auto& f : ck->files_) {
      for (const auto& [name, e] : f->entries()) {
        auto it = listed.find(name);
        if (it == listed.end())
          return errorf("{}: holds tensor '{}' which the index does not list", f->path(), name);
        if (ck->files_[file_ids[it->second]].get() != f.get())
          return errorf("{}: holds tensor '{}' which the index places in {}", f->path(), name, it->second);
      }
    }
  } else if (fs::exists(single_path, ec)) {
    M2_ASSIGN_OR_RETURN(auto sf, SafetensorsFile::open(single_path.string()));
    ck->files_.push_back(std::move(sf));
    for (const auto& [name, e] : ck->files_[0]->entries()) ck->index_[name] = {0, &e};
  } else {
    return errorf("{}: no model.safetensors.index.json or model.safetensors", dir);
  }
  return ck;
}

const SafetensorsEntry* Checkpoint::entry(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second.second;
}

Result<TensorView> Checkpoint::get(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) return errorf("{}: missing tensor '{}'", dir_, name);
  return files_[it->second.first]->view(*it->second.second);
}

std::string Checkpoint::file_of(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? dir_ : files_[it->second.first]->path();
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(index_.size());
  for (const auto& [name, _] : index_) out.push_back(name);
  return out;
}

std::optional<CheckpointLocation> Checkpoint::locate(const void* data) const {
  // Compared as integers: relational operators on pointers into different
  // objects are unspecified.
  const auto addr = reinterpret_cast<uintptr_t>(data);
  for (size_t i = 0; i < files_.size(); ++i) {
    const MappedFile& m = files_[i]->mapped();
    const auto base = reinterpret_cast<uintptr_t>(m.data());
    if (m.data() && addr >= base && addr < base + m.size()) return CheckpointLocation{i, addr - base};
  }
  return std::nullopt;
}

uint64_t Checkpoint::total_bytes() const {
  uint64_t n = 0;
  for (const auto& f : files_) n += f->mapped().size();
  return n;
}

}  // namespace m2
