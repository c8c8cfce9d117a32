// Shared by every fuzz target: Tools/fuzz-build compiles this file into each target's module.
// How a broken property is reported, and how inputs are shown in the report.

/// Stops the run (libFuzzer saves the input) naming the target, the property that broke and
/// what differed, with the input as hex (its first 2 KiB).
func fuzzFailure(_ target: String, _ property: String, _ detail: String, input bytes: [UInt8]) -> Never {
    let shown = bytes.count <= 2048 ? hex(bytes) : hex(Array(bytes.prefix(2048))) + "..."
    fatalError("\(target) fuzz property \(property) failed: \(detail)\ninput (\(bytes.count) bytes): \(shown)")
}

private let hexDigits = Array("0123456789abcdef".utf8)

/// Bytes as lower-case hex, two digits each.
func hex(_ bytes: [UInt8]) -> String {
    var out: [UInt8] = []
    out.reserveCapacity(bytes.count * 2)
    for byte in bytes {
        out.append(hexDigits[Int(byte >> 4)])
        out.append(hexDigits[Int(byte & 0xF)])
    }
    return String(decoding: out, as: UTF8.self)
}

/// Text in quotes, with control and non-ASCII characters escaped (`\u{…}`).
func quoted(_ text: String) -> String {
    "\"" + text.unicodeScalars.map { $0.isASCII && $0.value >= 0x20 ? String($0) : "\\u{\(String($0.value, radix: 16))}" }.joined() + "\""
}
