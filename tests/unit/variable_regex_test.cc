// VariableRegex: train_config's variable regexes match as Python's re.match (at the start of the
// name), run in linear time on RE2 whatever the pattern, and a pattern RE2 refuses is a
// ConfigError naming its field, from validate_pipeline (config check) as from train.
#include "engine/variable_regex.h"

#include <gtest/gtest.h>

#include <string>

#include "trainyard/core/config.h"
#include "trainyard/core/config_validation.h"
#include "trainyard/error.h"

namespace trainyard {
namespace {

std::string error_of(const std::string& pattern) {
  try {
    VariableRegex regex(pattern, "train_config.freeze_variables[2]");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(VariableRegexTest, MatchesAtTheStartOfTheNameAsReMatch) {
  const VariableRegex bia("fully_connected/bia", "field");
  EXPECT_TRUE(bia.matches_prefix("fully_connected/biases"));
  EXPECT_FALSE(bia.matches_prefix("tower/fully_connected/biases"));
  const VariableRegex biases(".*/biases", "field");
  EXPECT_TRUE(biases.matches_prefix("tower/fully_connected/biases"));
  EXPECT_FALSE(biases.matches_prefix("tower/fully_connected/weights"));
  const VariableRegex anchored("resnet_v1_50/block1$", "field");
  EXPECT_FALSE(anchored.matches_prefix("resnet_v1_50/block1/unit_1"));
  EXPECT_TRUE(VariableRegex(".*", "field").matches_prefix(""));
}

// Nested quantifiers that make a backtracking engine take 2^n steps on a near miss (the issue's
// freeze_variables hang). std::regex did not return from these; RE2 answers at once.
TEST(VariableRegexTest, NestedQuantifiersOnANearMissEndWithoutBacktracking) {
  const std::string near_miss = std::string(5000, 'a') + "!";
  EXPECT_FALSE(VariableRegex("(a+)+$", "field").matches_prefix(near_miss));
  EXPECT_FALSE(VariableRegex("(a|aa)*$", "field").matches_prefix(near_miss));
  EXPECT_FALSE(VariableRegex("(.*a){20}b", "field").matches_prefix(near_miss));
  EXPECT_TRUE(VariableRegex("(a+)+!", "field").matches_prefix(near_miss));
}

TEST(VariableRegexTest, PatternsRe2RefusesNameTheFieldAndThePattern) {
  EXPECT_EQ(error_of("fully_connected/("),
            "train_config.freeze_variables[2]: bad variable regex 'fully_connected/(': missing ): "
            "fully_connected/(");
  const std::string lookahead = error_of("(?!logits).*");
  EXPECT_NE(lookahead.find("train_config.freeze_variables[2]: bad variable regex '(?!logits).*'"),
            std::string::npos)
      << lookahead;
  EXPECT_NE(lookahead.find("RE2, which has no lookaround or backreferences"), std::string::npos)
      << lookahead;
  EXPECT_NE(error_of("(a)\\1").find("no lookaround or backreferences"), std::string::npos);
  EXPECT_EQ(error_of("fully_connected/.*"), "");
}

TEST(VariableRegexTest, ConfigCheckRefusesEveryBadVariableRegexNamingItsField) {
  const config::Pipeline p = parse_pipeline_config(
      "train_config { freeze_variables: 'ok/.*' freeze_variables: '[' "
      "update_trainable_variables: '(?=x)' gradient_multipliers { variable_regex: 'a{2,1}' "
      "multiplier: 2 } }",
      "test");
  try {
    validate_pipeline(p, "test.config");
    FAIL() << "validate_pipeline accepted bad regexes";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("train_config.freeze_variables[1]: bad variable regex '['"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("train_config.update_trainable_variables[0]"), std::string::npos) << what;
    EXPECT_NE(what.find("train_config.gradient_multipliers[0].variable_regex"), std::string::npos)
        << what;
    EXPECT_EQ(what.find("freeze_variables[0]"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace trainyard
