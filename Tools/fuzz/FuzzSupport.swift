// Shared by every fuzz target: Tools/fuzz/build compiles this file into each target's module.
// How a broken property is reported, and how inputs are shown in the report.

import NearbyBasics

/// Stops the run (libFuzzer saves the input) naming the target, the property that broke and
/// what differed, with the input as hex (its first 2 KiB).
func fuzzFailure(_ target: String, _ property: String, _ detail: String, input bytes: [UInt8]) -> Never {
    let shown = bytes.count <= 2048 ? hexString(bytes) : hexString(bytes.prefix(2048)) + "..."
    fatalError("\(target) fuzz property \(property) failed: \(detail)\ninput (\(bytes.count) bytes): \(shown)")
}

/// Text in quotes, with control and non-ASCII characters escaped (`\u{…}`).
func quoted(_ text: String) -> String {
    "\"" + text.unicodeScalars.map { $0.isASCII && $0.value >= 0x20 ? String($0) : "\\u{\(String($0.value, radix: 16))}" }.joined() + "\""
}
