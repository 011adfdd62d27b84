// Bucket-set assembly of /update_weights_from_tensor (server/weight_buckets.h),
// its query parsing, and the routed-experts base64 codec (routed_experts.h).
#include <gtest/gtest.h>

#include "server/routed_experts.h"
#include "server/weight_buckets.h"

namespace m2::server {
namespace {

std::vector<UpdateTensor> tensors(std::initializer_list<const char*> names) {
  std::vector<UpdateTensor> out;
  for (const char* n : names) {
    UpdateTensor t;
    t.name = n;
    t.shape = Shape{1};
    t.data.reset(new uint8_t[4]());
    t.source = "bucket";
    out.push_back(std::move(t));
  }
  return out;
}

TEST(WeightBuckets, CompletesWhenEveryBucketArrivedInAnyOrder) {
  WeightBuckets b;
  auto r = b.add({"s", 2, 3}, tensors({"c"}));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->complete);
  EXPECT_EQ(r->received, 1);
  ASSERT_TRUE(b.pending());
  EXPECT_EQ(b.pending()->first, "s");
  r = b.add({"s", 0, 3}, tensors({"a", "b"}));
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->complete);
  r = b.add({"s", 1, 3}, tensors({}));
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->complete);
  EXPECT_EQ(r->tensors.size(), 3u);
  EXPECT_FALSE(b.pending());
}

TEST(WeightBuckets, RefusesInconsistentBucketsAndDropsTheSet) {
  WeightBuckets b;
  ASSERT_TRUE(b.add({"s", 0, 2}, tensors({"a"})).ok());
  auto dup = b.add({"s", 0, 2}, tensors({"b"}));
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("already received"), std::string::npos);
  EXPECT_FALSE(b.pending());  // dropped: the next bucket 1 does not complete anything
  auto r = b.add({"s", 1, 2}, tensors({"b"}));
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->complete);

  WeightBuckets c;
  ASSERT_TRUE(c.add({"s", 0, 2}, tensors({"a"})).ok());
  auto count = c.add({"s", 1, 3}, tensors({"b"}));
  ASSERT_FALSE(count.ok());
  EXPECT_NE(count.status().message().find("bucket_count 3 differs"), std::string::npos) << count.status().message();

  WeightBuckets d;
  ASSERT_TRUE(d.add({"s", 0, 2}, tensors({"a"})).ok());
  auto twice = d.add({"s", 1, 2}, tensors({"a"}));
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("tensor 'a' is already in another bucket"), std::string::npos);

  WeightBuckets e;
  EXPECT_FALSE(e.add({"s", 2, 2}, tensors({"a"})).ok());
  EXPECT_FALSE(e.add({"s", -1, 2}, tensors({"a"})).ok());
  EXPECT_FALSE(e.add({"s", 0, 0}, tensors({"a"})).ok());
  EXPECT_FALSE(e.add({"", 0, 1}, tensors({"a"})).ok());
}

TEST(WeightBuckets, ANewSetDisplacesAnIncompleteOne) {
  WeightBuckets b;
  ASSERT_TRUE(b.add({"old", 0, 2}, tensors({"a"})).ok());
  auto r = b.add({"new", 0, 1}, tensors({"b"}));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->dropped_set, "old");
  ASSERT_TRUE(r->complete);
  ASSERT_EQ(r->tensors.size(), 1u);
  EXPECT_EQ(r->tensors[0].name, "b");
  b.drop("nothing");
}

TEST(BucketHeader, FromQueryOrMetadata) {
  auto q = parse_query("/update_weights_from_tensor?bucket_set=step%2012&bucket_index=1&bucket_count=4&x");
  EXPECT_EQ(q.at("bucket_set"), "step 12");
  EXPECT_EQ(q.at("x"), "");
  auto h = bucket_header(q, {});
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_EQ(h->set_id, "step 12");
  EXPECT_EQ(h->index, 1);
  EXPECT_EQ(h->count, 4);
  auto m = bucket_header({}, {{"bucket_set", "a"}, {"bucket_index", "0"}, {"bucket_count", "1"}});
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->set_id, "a");
  auto missing = bucket_header({{"bucket_set", "a"}}, {});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("bucket_index is missing"), std::string::npos);
  auto bad = bucket_header({{"bucket_set", "a"}, {"bucket_index", "1x"}, {"bucket_count", "2"}}, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("bucket_index"), std::string::npos);
  EXPECT_TRUE(parse_query("/no/query").empty());
}

TEST(Base64, RoundTripsAndIsStrict) {
  for (const std::string& s : std::vector<std::string>{"", "a", "ab", "abc", "abcd", std::string("\0\xff\x10", 3)}) {
    auto back = base64_decode(base64_encode(s));
    ASSERT_TRUE(back) << s;
    EXPECT_EQ(*back, s);
  }
  EXPECT_EQ(base64_encode("abc"), "YWJj");
  EXPECT_EQ(base64_encode("ab"), "YWI=");
  EXPECT_FALSE(base64_decode("YWJ"));     // not a multiple of 4
  EXPECT_FALSE(base64_decode("YW=j"));    // data after padding
  EXPECT_FALSE(base64_decode("YW!j"));    // outside the alphabet
  EXPECT_FALSE(base64_decode("YQ==YWJj"));  // padding before the end
}

TEST(RoutedExperts, EncodesAndParsesTheSameShape) {
  ServerContext ctx;
  ctx.num_layers = 2, ctx.top_k = 2, ctx.num_experts = 4;
  const std::vector<int32_t> ids = {0, 1, 2, 3, 3, 0, 1, 2};  // [2 positions, 2 layers, 2]
  OrderedJson j = routed_experts_json(ids, ctx);
  EXPECT_EQ(j["dtype"], "uint8");
  EXPECT_EQ(j["shape"], OrderedJson::array({2, 2, 2}));
  OrderedJson body = {{"routing_replay", j}, {"return_routed_experts", true}};
  auto f = parse_routing_fields(body, ctx);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_TRUE(f->return_routed_experts);
  ASSERT_TRUE(f->replay);
  EXPECT_EQ(*f->replay, ids);
  SamplingParams p;
  EXPECT_FALSE(apply_routing_fields(*f, 1, &p).ok());  // 2 positions for a 1-token prompt
  EXPECT_TRUE(apply_routing_fields(*f, 2, &p).ok());
  EXPECT_EQ(p.routing_replay, f->replay);

  auto refused = [&](OrderedJson r, const std::string& needle) {
    auto res = parse_routing_fields({{"routing_replay", r}}, ctx);
    ASSERT_FALSE(res.ok()) << needle;
    EXPECT_NE(res.status().message().find(needle), std::string::npos) << res.status().message();
  };
  OrderedJson r = j;
  r["shape"] = {2, 3, 2};
  refused(r, "routing_replay.shape");
  r = j;
  r["dtype"] = "uint16";
  refused(r, "routing_replay.dtype");
  r = j;
  r["data"] = base64_encode(std::string("\x00\x01\x02\x03\x03\x00\x01", 7));
  refused(r, "holds 7 bytes");
  r = j;
  r["data"] = base64_encode(std::string("\x00\x00\x02\x03\x03\x00\x01\x02", 8));
  refused(r, "given twice");
  r = j;
  r["data"] = base64_encode(std::string("\x00\x04\x02\x03\x03\x00\x01\x02", 8));
  refused(r, "expert id 4 outside [0, 4)");
  r = j;
  r["data"] = "not base64!";
  refused(r, "not valid base64");
  refused("x", "must be an object");
  auto b = parse_routing_fields({{"return_routed_experts", 1}}, ctx);
  EXPECT_FALSE(b.ok());
}

}  // namespace
}  // namespace m2::server
