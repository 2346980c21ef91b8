// Declared options: defaults, typed values from configs, text values from flags, and the
// errors that name the option.
#include "trainyard/options.h"

#include <gtest/gtest.h>

#include "trainyard/error.h"

namespace trainyard {
namespace {

constexpr OptionSpec kSpecs[] = {
    {"use_bias", OptionType::kBool, "true", ""},
    {"moe_num_mixtures", OptionType::kInt, "2", ""},
    {"l2_penalty", OptionType::kFloat, "1e-8", ""},
    {"activation", OptionType::kString, "sigmoid", ""},
    {"feature_sizes", OptionType::kIntList, "1024,128", ""},
    {"rates", OptionType::kFloatList, "", ""},
    {"feature_names", OptionType::kStringList, "mean_rgb, mean_audio", ""},
};

std::string message_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(OptionsTest, DefaultsFillEveryDeclaredOption) {
  Options o = Options::resolve("MoeModel", kSpecs, {});
  EXPECT_TRUE(o.get_bool("use_bias"));
  EXPECT_EQ(o.get_int("moe_num_mixtures"), 2);
  EXPECT_DOUBLE_EQ(o.get_float("l2_penalty"), 1e-8);
  EXPECT_EQ(o.get_string("activation"), "sigmoid");
  EXPECT_EQ(o.get_int_list("feature_sizes"), (std::vector<int64_t>{1024, 128}));
  EXPECT_TRUE(o.get_float_list("rates").empty());
  EXPECT_EQ(o.get_string_list("feature_names"),
            (std::vector<std::string>{"mean_rgb", "mean_audio"}));
  EXPECT_EQ(o.values().size(), std::size(kSpecs));
}

TEST(OptionsTest, GivenValuesReplaceDefaultsAndWiden) {
  Options o = Options::resolve("MoeModel", kSpecs,
                               {{"moe_num_mixtures", int64_t{4}},
                                {"l2_penalty", int64_t{1}},          // int widens to float
                                {"feature_sizes", int64_t{1152}}});  // scalar to list
  EXPECT_EQ(o.get_int("moe_num_mixtures"), 4);
  EXPECT_DOUBLE_EQ(o.get_float("l2_penalty"), 1.0);
  EXPECT_EQ(o.get_int_list("feature_sizes"), (std::vector<int64_t>{1152}));
}

TEST(OptionsTest, UnknownOptionListsValidOnesAndNearest) {
  std::string m = message_of([] {
    Options::resolve("MoeModel", kSpecs, {{"moe_mixtures", int64_t{3}}});
  });
  EXPECT_NE(m.find("MoeModel has no option 'moe_mixtures'"), std::string::npos) << m;
  EXPECT_NE(m.find("Valid options: use_bias, moe_num_mixtures, l2_penalty"), std::string::npos)
      << m;
  EXPECT_NE(m.find("Did you mean 'moe_num_mixtures'?"), std::string::npos) << m;
}

TEST(OptionsTest, ClassWithoutOptionsSaysSo) {
  std::string m = message_of([] { Options::resolve("HingeLoss", {}, {{"b", 1.0}}); });
  EXPECT_NE(m.find("HingeLoss has no option 'b'. It takes no options."), std::string::npos) << m;
}

TEST(OptionsTest, WrongTypeNamesOptionAndBothTypes) {
  std::string m = message_of([] {
    Options::resolve("MoeModel", kSpecs, {{"moe_num_mixtures", std::string("four")}});
  });
  EXPECT_NE(m.find("MoeModel: option 'moe_num_mixtures' expects int, but was given string "
                   "\"four\""),
            std::string::npos)
      << m;
  // A float is never narrowed to an int.
  EXPECT_THROW(Options::resolve("MoeModel", kSpecs, {{"moe_num_mixtures", 2.5}}), InvalidArgument);
}

TEST(OptionsTest, TextValuesParseAsDeclaredType) {
  Options o = Options::resolve_text("MoeModel", kSpecs,
                                    {{"use_bias", "false"},
                                     {"moe_num_mixtures", "8"},
                                     {"l2_penalty", "0.5"},
                                     {"rates", "0.1, 0.2"},
                                     {"feature_names", "rgb"}});
  EXPECT_FALSE(o.get_bool("use_bias"));
  EXPECT_EQ(o.get_int("moe_num_mixtures"), 8);
  EXPECT_DOUBLE_EQ(o.get_float("l2_penalty"), 0.5);
  EXPECT_EQ(o.get_float_list("rates"), (std::vector<double>{0.1, 0.2}));
  EXPECT_EQ(o.get_string_list("feature_names"), (std::vector<std::string>{"rgb"}));
}

TEST(OptionsTest, UnreadableTextNamesOptionAndText) {
  std::string m = message_of([] {
    Options::resolve_text("MoeModel", kSpecs, {{"moe_num_mixtures", "2x"}});
  });
  EXPECT_NE(m.find("option 'moe_num_mixtures': cannot read \"2x\" as an integer"),
            std::string::npos)
      << m;
  EXPECT_THROW(Options::resolve_text("MoeModel", kSpecs, {{"use_bias", "yes"}}), InvalidArgument);
  EXPECT_THROW(Options::resolve_text("MoeModel", kSpecs, {{"feature_sizes", "1024,,128"}}),
               InvalidArgument);
}

TEST(OptionsTest, BadDeclaredDefaultIsReportedAgainstTheClass) {
  constexpr OptionSpec kBad[] = {{"steps", OptionType::kInt, "ten", ""}};
  std::string m = message_of([&] { Options::resolve("BadModel", kBad, {}); });
  EXPECT_NE(m.find("BadModel declares an unreadable default"), std::string::npos) << m;
  constexpr OptionSpec kTwice[] = {{"a", OptionType::kInt, "1", ""},
                                   {"a", OptionType::kInt, "2", ""}};
  m = message_of([&] { Options::resolve("TwiceModel", kTwice, {}); });
  EXPECT_NE(m.find("TwiceModel declares option 'a' twice"), std::string::npos) << m;
}

TEST(OptionsTest, GettersCheckTypeAndPresence) {
  Options o = Options::resolve("MoeModel", kSpecs, {});
  EXPECT_THROW(o.get_int("activation"), InvalidArgument);
  EXPECT_THROW(o.get("missing"), NotFound);
}

TEST(OptionsTest, ValuesRenderAsTheyParse) {
  for (const OptionSpec& spec : kSpecs) {
    OptionValue v = parse_option_value(spec, spec.default_value);
    EXPECT_EQ(parse_option_value(spec, option_value_to_string(v)), v) << spec.name;
  }
}

}  // namespace
}  // namespace trainyard
