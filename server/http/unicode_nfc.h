// Unicode Normalization Form C for raw keys (issue 33, item 10): one text, one key. A scanner or keyboard
// wedge that sends "é" as U+0065 U+0301 (NFD) instead of U+00E9 would otherwise make the same item two keys
// (two digests: `new` twice). scangate refuses a key that is not in NFC rather than normalising it: a
// normalised spelling could map a key recorded before this check to a different digest, and a refusal is never a
// wrong verdict. ASCII (every barcode symbology's character set) is NFC by definition and decided without ICU.
// Pure; any thread (ICU's NFC instance is initialised once, thread-safely, by ICU).
#pragma once

#include <string_view>

namespace scangate::server {

// True when `utf8` (valid UTF-8, checked by the caller) is in NFC; false also when ICU cannot decide (an
// ICU error), so a key is never accepted unchecked.
bool IsNfc(std::string_view utf8);

}  // namespace scangate::server
