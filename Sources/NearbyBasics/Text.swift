// What the programs used from full Foundation and FoundationEssentials does not have, done
// with the standard library (numbers: Formatting.swift): linking full Foundation (ICU with it) costs a
// program several MiB of memory and milliseconds of start-up. Each gives what Foundation gave.

extension StringProtocol {
    /// The text without leading and trailing blanks: what Foundation's
    /// `trimmingCharacters(in: .whitespaces)` (or `.whitespacesAndNewlines` when `newlines`)
    /// gives, scalar by scalar, with the same set (U+200B included).
    package func trimmingBlanks(newlines: Bool = false) -> String {
        let scalars = unicodeScalars
        func blank(_ scalar: Unicode.Scalar) -> Bool {
            switch scalar.value {
            case 0x09, 0x20, 0xA0, 0x1680, 0x2000...0x200B, 0x202F, 0x205F, 0x3000: true
            case 0x0A...0x0D, 0x85, 0x2028, 0x2029: newlines
            default: false
            }
        }
        guard let first = scalars.firstIndex(where: { !blank($0) }) else { return "" }
        let last = scalars.lastIndex(where: { !blank($0) })!
        var kept = String.UnicodeScalarView()
        kept.append(contentsOf: scalars[first...last])
        return String(kept)
    }
}

/// What Foundation's `localizedDescription` said for `error` (on Linux, in English): "The
/// operation could not be completed." and the reason known for its Cocoa code (the JSON
/// coders' errors), else its domain and code. (FoundationEssentials' `CocoaError` does not
/// tell its domain and code this way: pass them to ``foundationDescription(domain:code:)``.)
package func foundationDescription(of error: any Error) -> String {
    foundationDescription(domain: error._domain, code: error._code)
}

/// What Foundation's `localizedDescription` said for an error of `domain` and `code` with no
/// description of its own.
package func foundationDescription(domain: String, code: Int) -> String {
    if domain == "NSCocoaErrorDomain", let reason = cocoaReasons[code] {
        return "The operation could not be completed. \(reason)"
    }
    return "The operation could not be completed. (\(domain) error \(code).)"
}

/// swift-corelibs-foundation's reasons for the Cocoa error codes.
private let cocoaReasons: [Int: String] = [
    4: "The file doesn’t exist.",
    255: "The file couldn’t be locked.",
    257: "You don’t have permission.",
    258: "The file name is invalid.",
    259: "The file isn’t in the correct format.",
    260: "The file doesn’t exist.",
    261: "The specified text encoding isn’t applicable.",
    262: "The specified URL type isn’t supported.",
    263: "The item is too large.",
    264: "The text encoding of the contents couldn’t be determined.",
    513: "You don’t have permission.",
    514: "The file name is invalid.",
    516: "A file with the same name already exists.",
    517: "The specified text encoding isn’t applicable.",
    518: "The specified URL type isn’t supported.",
    640: "There isn’t enough space.",
    642: "The volume is read only.",
    1024: "The value is invalid.",
    2048: "The value is invalid.",
    3072: "The operation was cancelled.",
    3328: "The requested operation is not supported.",
    3840: "The data is not in the correct format.",
    3841: "The data is in a format that this application doesn’t understand.",
    3842: "An error occurred in the source of the data.",
    3851: "An error occurred in the destination for the data.",
    3852: "An error occurred in the content of the data.",
    4353: "The file is not available on iCloud yet.",
    4354: "There isn’t enough space in your account.",
    4355: "The iCloud servers might be unreachable or your settings might be incorrect.",
    4864: "The data isn’t in the correct format.",
    4865: "The data is missing.",
    4866: "The data isn’t in the correct format.",
]

extension String {
    /// What Foundation's `padding(toLength: length, withPad: " ", startingAt: 0)` gave: the text
    /// cut or filled with spaces to `length` UTF-16 units (a character cut in half becomes U+FFFD).
    package func padded(toUTF16Length length: Int) -> String {
        let units = utf16
        if length > units.count { return self + String(repeating: " ", count: length - units.count) }
        return length == units.count ? self : String(decoding: units.prefix(length), as: UTF16.self)
    }
}

extension StringProtocol {
    /// The text in double quotes for an error message, cut after its first `limit` characters
    /// with "…" when longer: the reader must recognise the value, not read all 300 bytes of it.
    package func quotedPrefix(limit: Int = 40) -> String {
        count > limit ? "\"\(prefix(limit))…\"" : "\"\(self)\""
    }
}
