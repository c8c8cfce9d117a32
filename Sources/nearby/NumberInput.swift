import ArgumentParser

/// Numbers typed on the command line, checked while they are parsed, so that `-1`, `abc` and
/// `70000` all get the same kind of answer: what was typed, and what is allowed.
///
/// ArgumentParser reads a token that begins with `-` as an option, so a negative number given
/// where a number belongs would otherwise be reported as a missing value or argument.
/// ``NegativeNumbers`` hands such tokens to these checks instead.
enum NumberInput {
    struct Refusal: Error, CustomStringConvertible {
        let description: String
    }

    /// A whole number in `range`; `what` names it in messages ("port", "--ttl").
    static func integer(_ what: String, _ range: ClosedRange<Int>, use allowed: String) -> @Sendable (String) throws -> Int {
        { text in
            let typed = NegativeNumbers.unmarked(text)
            guard let value = Int(typed) else { throw Refusal(description: "\(what) \(typed) is not a whole number; use \(allowed)") }
            guard range.contains(value) else { throw Refusal(description: "\(what) \(typed) is out of range; use \(allowed)") }
            return value
        }
    }

    /// Seconds: zero or more, at most `maximum` (zero switches something off).
    static func secondsOrZero(_ what: String, maximum: Double) -> @Sendable (String) throws -> Double {
        { text in
            let typed = NegativeNumbers.unmarked(text)
            let allowed = "a number of seconds from 0 to \(Int(maximum))"
            guard let value = Double(typed), value.isFinite else { throw Refusal(description: "\(what) \(typed) is not a number; use \(allowed)") }
            guard value >= 0, value <= maximum else { throw Refusal(description: "\(what) \(typed) is out of range; use \(allowed)") }
            return value
        }
    }

    /// Seconds: more than zero, at most `maximum` (a bound also keeps the conversion to a
    /// `Duration` from overflowing).
    static func seconds(_ what: String, maximum: Double) -> @Sendable (String) throws -> Double {
        { text in
            let typed = NegativeNumbers.unmarked(text)
            let allowed = "a number of seconds above 0, at most \(Int(maximum))"
            guard let value = Double(typed), value.isFinite else { throw Refusal(description: "\(what) \(typed) is not a number; use \(allowed)") }
            guard value > 0, value <= maximum else { throw Refusal(description: "\(what) \(typed) is out of range; use \(allowed)") }
            return value
        }
    }
}

/// Negative numbers on the command line.
enum NegativeNumbers {
    /// Marks a negative number given where a positional argument belongs (see `Nearby.parse`).
    static let mark = "\u{E000}"

    /// Whether `token` reads as a negative number: `-1`, `-0.5`.
    static func isNegativeNumber(_ token: some StringProtocol) -> Bool {
        guard token.hasPrefix("-"), token.count > 1 else { return false }
        return Double(token) != nil
    }

    /// `--timeout -1` → `--timeout=-1`: ArgumentParser passes the value on, and the option's own
    /// check says what is wrong with it. Tokens after `--` stay as they are.
    static func joiningOptionValues(_ arguments: [String]) -> [String] {
        var result: [String] = []
        var index = 0
        while index < arguments.count {
            let token = arguments[index]
            if token == "--" {
                result += arguments[index...]
                break
            }
            if token.hasPrefix("--"), !token.contains("="), index + 1 < arguments.count, isNegativeNumber(arguments[index + 1]) {
                result.append("\(token)=\(arguments[index + 1])")
                index += 2
                continue
            }
            result.append(token)
            index += 1
        }
        return result
    }

    /// The same command line with every standalone negative number marked, so that it is
    /// parsed as a positional value; nil when there is none. Used only to explain a failure:
    /// a command parsed this way never runs, so a mark can never end up in a name or TXT entry.
    static func marked(_ arguments: [String]) -> [String]? {
        let end = arguments.firstIndex(of: "--") ?? arguments.endIndex
        guard arguments[..<end].contains(where: { isNegativeNumber($0) }) else { return nil }
        return arguments[..<end].map { isNegativeNumber($0) ? mark + $0 : $0 } + arguments[end...]
    }

    /// What the person typed, without the mark.
    static func unmarked(_ text: String) -> String {
        text.hasPrefix(mark) ? String(text.dropFirst(mark.count)) : text
    }
}
