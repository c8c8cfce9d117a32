public import NearbyBasics

/// Why a text could not be made into a QR code. ``message`` says what was wrong and what is allowed.
public struct QRCodeError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What kind of problem this is. New codes may be added; switch with a `default`.
    public typealias Code = OpenKind<QRCodeError>

    /// What kind of problem this is.
    public var code: Code
    /// What was wrong and what is allowed, for a person to read.
    public var message: String

    /// An error of the given kind with its message.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// The message.
    public var description: String { message }
}

extension OpenKind where Owner == QRCodeError {
    /// The text is more than the largest QR code (version 40) holds at the correction level asked for.
    public static var tooLong: Self { Self("tooLong") }
    /// The text cannot be encoded at all: it is empty, or contains a NUL character.
    public static var invalidText: Self { Self("invalidText") }
    /// libqrencode failed for another reason (out of memory).
    public static var encodingFailed: Self { Self("encodingFailed") }
}
