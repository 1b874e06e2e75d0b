// The SDK's option schemas: exclusive bounds, path options, the typed binding.
#include <gtest/gtest.h>

#include "trainyard/error.h"
#include "trainyard/options.h"

namespace trainyard {
namespace {

struct MlpOptions {
  std::vector<int64_t> hidden;
  double dropout = 0;
  std::string activation;
  bool bias = true;
  std::string weights;
  std::vector<std::string> tags;
};

TypedSchema<MlpOptions> mlp_schema() {
  TypedSchema<MlpOptions> s;
  s.add("hidden_sizes", &MlpOptions::hidden, {256, 128}, "hidden widths").min(1);
  s.add("dropout", &MlpOptions::dropout, 0.0, "dropout probability").min(0.0).below(1.0);
  s.add("activation", &MlpOptions::activation, "relu", "activation").one_of({"relu", "gelu"});
  s.add("bias", &MlpOptions::bias, true, "add a bias");
  s.add_path("weights", &MlpOptions::weights, "", "initial weights file");
  s.add("tags", &MlpOptions::tags, {}, "labels");
  return s;
}

TEST(Options, TypedSchemaDeclaresTypesDefaultsAndBounds) {
  const auto typed = mlp_schema();
  const Schema& s = typed.schema();
  ASSERT_EQ(s.specs().size(), 6u);
  EXPECT_EQ(s.find("hidden_sizes")->type, OptionType::integer_list);
  EXPECT_EQ(to_string(*s.find("hidden_sizes")->default_value), "[256, 128]");
  EXPECT_EQ(s.find("dropout")->type, OptionType::number);
  EXPECT_TRUE(s.find("dropout")->max_exclusive);
  EXPECT_EQ(s.find("weights")->type, OptionType::path);
  EXPECT_STREQ(type_name(s.find("weights")->type), "path");
  EXPECT_EQ(s.find("tags")->type, OptionType::string_list);
}

TEST(Options, BindFillsTheStructAndBackAgain) {
  const auto typed = mlp_schema();
  Options o({{"hidden_sizes", Value(std::vector<int64_t>{64})},
             {"dropout", Value(0.25)},
             {"activation", Value(std::string("gelu"))},
             {"bias", Value(false)},
             {"weights", Value(std::string("/w.pt"))},
             {"tags", Value(std::vector<std::string>{"a"})}});
  MlpOptions m = typed.bind(o);
  EXPECT_EQ(m.hidden, std::vector<int64_t>{64});
  EXPECT_DOUBLE_EQ(m.dropout, 0.25);
  EXPECT_EQ(m.activation, "gelu");
  EXPECT_FALSE(m.bias);
  EXPECT_EQ(m.weights, "/w.pt");
  EXPECT_EQ(typed.options_of(m).values(), o.values());
  // get<T> by string (the deprecated 0.x call) still works on the same options.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  EXPECT_EQ(o.get<std::string>("activation"), "gelu");
#pragma GCC diagnostic pop
}

TEST(Options, BindOfOptionsMissingAKeyNamesIt) {
  const auto typed = mlp_schema();
  try {
    typed.bind(Options({{"hidden_sizes", Value(std::vector<int64_t>{64})}}));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'dropout'"), std::string::npos) << e.what();
  }
}

struct Wrong {
  float scale = 1;
  int count = 0;
  double rate = 0;
};
template <class Field, class Default>
concept Addable = requires(TypedSchema<Wrong> s, Field field, Default value) {
  s.add("k", field, value, "");
};
template <class Field>
concept Requirable = requires(TypedSchema<Wrong> s, Field field) {
  s.require("k", field, "");
};

TEST(Options, FieldsOfOtherTypesDoNotBind) {
  static_assert(!OptionField<float> && !OptionField<int> && OptionField<double> &&
                OptionField<std::vector<std::string>>);
  static_assert(!Addable<float Wrong::*, float>);
  static_assert(!Requirable<int Wrong::*>);
  static_assert(Addable<double Wrong::*, double>);
}

TEST(Options, ExclusiveBoundsSayWhatTheyAllow) {
  OptionSpec half_open;
  half_open.type = OptionType::number;
  half_open.min(0.0).below(1.0);
  EXPECT_TRUE(half_open.in_range(0.0));
  EXPECT_TRUE(half_open.in_range(0.5));
  EXPECT_FALSE(half_open.in_range(1.0));
  EXPECT_EQ(half_open.range_text(), "at least 0.0 and below 1.0");
  OptionSpec positive;
  positive.type = OptionType::integer;
  positive.above(0);
  EXPECT_FALSE(positive.in_range(0));
  EXPECT_TRUE(positive.in_range(1));
  EXPECT_EQ(positive.range_text(), "above 0");
  OptionSpec closed;
  closed.type = OptionType::integer;
  closed.range(1, 8);
  EXPECT_EQ(closed.range_text(), "between 1 and 8");
  EXPECT_TRUE(closed.in_range(8));
}

}  // namespace
}  // namespace trainyard
