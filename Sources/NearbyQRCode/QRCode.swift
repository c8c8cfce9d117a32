import CQREncode

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A QR code: the square of dark and light modules that encodes a text.
///
/// Made for invitation links: a link of upper-case letters, digits and `:/.-` is encoded in QR's
/// alphanumeric mode (5.5 bits a character), so a few hundred characters still make a code small
/// enough for a terminal. Lower-case letters and other characters are encoded as bytes
/// (8 bits each), which needs a larger code for the same text.
///
/// ```swift
/// let code = try QRCode(encoding: "NEARBY:/INVITE/…")
/// print(code.terminalText(style: .utf8))
/// try Data(code.png()).write(to: url)
/// ```
///
/// How much fits a default 80×25 terminal with ``terminalText(style:quietZone:)`` in
/// ``TerminalStyle/utf8`` and a 2-module quiet zone: a version-7 code (45 modules), which holds
/// up to 224 alphanumeric characters at ``Correction/low`` and 178 at ``Correction/medium``.
/// Longer texts make version 8 (49 modules, 27 lines) or more.
public struct QRCode: Sendable, Hashable {
    /// How much of the code may be damaged or hidden and still be read. Higher levels make a
    /// larger code for the same text.
    public enum Correction: Sendable, Hashable, CaseIterable {
        /// About 7 % of the code may be lost; the smallest code. Enough on a screen.
        case low
        /// About 15 % may be lost: the usual choice, and the default.
        case medium
        /// About 25 % may be lost.
        case quartile
        /// About 30 % may be lost; the largest code.
        case high
    }

    /// The number of modules along each side (21 for version 1, 4 more each version up to 177
    /// for version 40), without the quiet zone.
    public let size: Int

    /// The QR version, 1 to 40: the smallest that holds the text at the correction level asked for.
    public let version: Int

    /// Row by row from the top left, `true` for a dark module.
    private let modules: [Bool]

    /// Encodes a text into the smallest QR code that holds it at the given correction level.
    ///
    /// The text is encoded as UTF-8, case-sensitively; runs of digits use numeric mode, runs of
    /// upper-case letters, digits and ` $%*+-./:` alphanumeric mode, everything else byte mode.
    ///
    /// - Parameters:
    ///   - text: The text, one character or more, without NUL characters.
    ///   - correction: The error correction level; ``Correction/medium`` unless told.
    /// - Throws: ``QRCodeError`` with `invalidText` for an empty text or one
    ///   containing NUL, `tooLong` when even version 40 cannot hold it,
    ///   `encodingFailed` when libqrencode fails otherwise (out of memory).
    public init(encoding text: String, correction: Correction = .medium) throws(QRCodeError) {
        let bytes = text.utf8.count
        if bytes == 0 {
            throw QRCodeError(.invalidText, "the text is empty; a QR code needs at least one character")
        }
        if let offset = text.utf8.firstIndex(of: 0).map({ text.utf8.distance(from: text.utf8.startIndex, to: $0) }) {
            throw QRCodeError(
                .invalidText,
                "the text contains a NUL character (byte \(offset) of \(bytes)); a QR code here holds any text without NUL")
        }
        // The largest any code holds is 7089 digits; anything longer need not reach libqrencode.
        if bytes > 7089 { throw Self.tooLong(bytes: bytes, correction: correction) }

        let encoded: UnsafeMutablePointer<QRcode>? = text.withCString { string in
            errno = 0
            return QRcode_encodeString(string, 0, correction.level, QR_MODE_8, 1)
        }
        let failure = errno
        guard let encoded else {
            switch failure {
            case ERANGE: throw Self.tooLong(bytes: bytes, correction: correction)
            case ENOMEM: throw QRCodeError(.encodingFailed, "libqrencode ran out of memory encoding \(bytes) bytes")
            default:
                throw QRCodeError(
                    .encodingFailed, "libqrencode could not encode the text (\(bytes) bytes): \(String(cString: strerror(failure)))")
            }
        }
        defer { QRcode_free(encoded) }

        let width = Int(encoded.pointee.width)
        guard width >= 21, let data = encoded.pointee.data else {
            throw QRCodeError(.encodingFailed, "libqrencode returned a code without modules (width \(width))")
        }
        // libqrencode's byte per module: bit 0 is dark, the other bits say which part it belongs to.
        let buffer = UnsafeBufferPointer(start: data, count: width * width)
        self.size = width
        self.version = Int(encoded.pointee.version)
        self.modules = buffer.map { $0 & 1 == 1 }
    }

    /// Whether the module at column `x`, row `y` (from the top left, 0 to ``size`` − 1) is dark.
    ///
    /// Coordinates outside the code are light: the quiet zone around it.
    public func isDark(x: Int, y: Int) -> Bool {
        guard x >= 0, y >= 0, x < size, y < size else { return false }
        return modules[y * size + x]
    }

    private static func tooLong(bytes: Int, correction: Correction) -> QRCodeError {
        let (alphanumeric, other) = correction.capacity
        return QRCodeError(
            .tooLong,
            "the text is too long for a QR code: \(bytes) bytes; the largest code (version 40) at \(correction) error correction "
                + "holds at most \(alphanumeric) characters of upper-case letters, digits and ` $%*+-./:`, "
                + "or \(other) bytes of other text (a lower correction level holds more)")
    }
}

extension QRCode.Correction: CustomStringConvertible {
    /// The level's name: `low`, `medium`, `quartile` or `high`.
    public var description: String {
        switch self {
        case .low: "low"
        case .medium: "medium"
        case .quartile: "quartile"
        case .high: "high"
        }
    }

    var level: QRecLevel {
        switch self {
        case .low: QR_ECLEVEL_L
        case .medium: QR_ECLEVEL_M
        case .quartile: QR_ECLEVEL_Q
        case .high: QR_ECLEVEL_H
        }
    }

    /// What version 40 holds at this level (ISO/IEC 18004 table 7): alphanumeric characters, bytes.
    var capacity: (alphanumeric: Int, bytes: Int) {
        switch self {
        case .low: (4296, 2953)
        case .medium: (3391, 2331)
        case .quartile: (2420, 1663)
        case .high: (1852, 1273)
        }
    }
}
