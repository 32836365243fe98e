#include "plan/chat_template.h"

#include <gtest/gtest.h>

#include "gguf/synth.h"

namespace kvgate::plan {
namespace {

// A template of the Qwen3 family's shape, written for this test: the last user message's
// index kept in a namespace, reasoning rendered only for replies after it, an enable_thinking
// switch in the generation prompt.
constexpr std::string_view kQwenShaped = R"({%- set ns = namespace(last_query = -1) -%}
{%- for m in messages -%}{%- if m.role == 'user' -%}{%- set ns.last_query = loop.index0 -%}{%- endif -%}{%- endfor -%}
{%- for m in messages -%}
{%- if m.role == 'assistant' -%}
{%- if loop.index0 > ns.last_query -%}<think>{{ m.reasoning_content }}</think>{%- endif -%}{{ m.content }}
{%- else -%}{{ m.content }}{%- endif -%}
{%- endfor -%}
{%- if enable_thinking is defined and not enable_thinking -%}<think></think>{%- endif -%})";

TEST(StableTemplateTest, TheHistoryGuardAlsoHonoursPreserveThinking) {
  const StableTemplate t = prefix_stable_template(kQwenShaped);
  ASSERT_TRUE(t.patched()) << t.describe();
  EXPECT_NE(t.text.find("{%- if ((preserve_thinking is defined and preserve_thinking is true) or "
                        "loop.index0 > ns.last_query) -%}"),
            std::string::npos)
      << t.text;
  // Everything else is the model's template, byte for byte.
  std::string back = t.text;
  const std::string added = "((preserve_thinking is defined and preserve_thinking is true) or ";
  back.erase(back.find(added), added.size());
  back.erase(back.find("ns.last_query)") + std::string_view("ns.last_query").size(), 1);
  EXPECT_EQ(back, kQwenShaped);
  EXPECT_NE(t.describe().find("preserve_thinking"), std::string::npos);
}

TEST(StableTemplateTest, TheBuiltInTemplateIsPatchedAndKeepsItsOtherConditions) {
  const StableTemplate t = prefix_stable_template(gguf::builtin_chat_template());
  ASSERT_TRUE(t.patched()) << t.describe();
  // The guard's other conditions still apply to the whole of the widened guard.
  EXPECT_NE(t.text.find("((preserve_thinking is defined and preserve_thinking is true) or loop.index0 > "
                        "ns.last_user) and message.reasoning_content is string"),
            std::string::npos)
      << t.text;
  EXPECT_EQ(t.text.size(), gguf::builtin_chat_template().size() +
                               std::string_view("((preserve_thinking is defined and preserve_thinking is true) or )")
                                   .size());
}

TEST(StableTemplateTest, TemplatesOfOtherShapesAreLeftAsTheyAre) {
  // Already has the switch (Qwen3.5/3.6 style).
  std::string with_switch(kQwenShaped);
  with_switch.insert(0, "{%- set keep = preserve_thinking is defined and preserve_thinking -%}");
  EXPECT_EQ(prefix_stable_template(with_switch).change, TemplateChange::kHasSwitch);
  // No thinking switch: its generation prompt has no block to match.
  EXPECT_EQ(prefix_stable_template("{%- for m in messages %}{{ m.content }}{% if loop.index0 > ns.x %}{% endif %}"
                                   "{% endfor %}")
                .change,
            TemplateChange::kNoThinkingSwitch);
  // ChatML without a history guard.
  EXPECT_EQ(prefix_stable_template("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
                                   "{% endfor %}{% if enable_thinking %}x{% endif %}")
                .change,
            TemplateChange::kNoHistoryGuard);
  // Two guards: which one drops the reasoning is not certain.
  std::string twice(kQwenShaped);
  twice += "{%- if loop.index0 > ns.other -%}{%- endif -%}";
  const StableTemplate t = prefix_stable_template(twice);
  EXPECT_EQ(t.change, TemplateChange::kSeveralGuards);
  EXPECT_TRUE(t.text.empty());
  EXPECT_NE(t.describe().find("left alone"), std::string::npos);
  EXPECT_EQ(prefix_stable_template("").change, TemplateChange::kNoThinkingSwitch);
}

}  // namespace
}  // namespace kvgate::plan
