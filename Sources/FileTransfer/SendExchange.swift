import PeerConnection

/// The sending side of one file's exchange (offer, answer, resume, bytes, trailer, outcome; see
/// ``TransferProtocol``) as a pure machine. It holds no file, stream or clock: the shell
/// (`FileSender`) tells it what arrived and what it found, and does the steps it returns, so
/// every rule of the exchange is tested without a connection (`SendExchangeTests`).
///
/// The order is fixed: ``begin()``; then each control message read is given to
/// ``received(_:)`` (nil when the stream ended first); a resume check is answered with
/// ``prefixChecked(matches:)``; the bytes sent, ``bytesSent(sha256:)``.
struct SendExchange: Sendable {
    /// What the shell does next, in the order given.
    enum Step: Equatable, Sendable {
        /// Write this control message on the stream.
        case send(JSONValue)
        /// Read the next control message and give it to ``received(_:)``.
        case readMessage
        /// Hash our file's first `count` bytes into the file's hash (the receiver's `.part` has
        /// them); tell ``prefixChecked(matches:)`` whether the digest is `expected`. On a
        /// mismatch the shell starts the hash again from nothing.
        case checkPrefix(count: Int64, expected: String)
        /// Send the file's bytes from `offset` to the end, hashing them after the prefix, then
        /// give the whole file's SHA-256 to ``bytesSent(sha256:)``.
        case sendBytes(from: Int64)
        /// Half-close the stream: nothing more goes from here.
        case finishStream
        /// The receiver saved the file under `savedAs`; the bytes from `start` went this time.
        case saved(savedAs: String, start: Int64)
        /// The exchange failed; with `reset`, the shell resets the stream with that reason and code.
        case failed(FileTransferError, reset: ExchangeReset?)
    }

    enum Phase: Equatable, Sendable {
        case idle
        case awaitingAnswer
        case checkingPrefix(offset: Int64)
        case sendingBytes(start: Int64)
        case awaitingOutcome(start: Int64)
        case done
    }

    let offer: TransferProtocol.Offer
    /// The name with its folders, as messages show it.
    let shownName: String
    private(set) var phase: Phase = .idle

    init(offer: TransferProtocol.Offer) {
        self.offer = offer
        shownName = (offer.folders + [offer.name]).joined(separator: "/")
    }

    /// Starts the exchange: the offer goes out and the answer is awaited.
    mutating func begin() -> [Step] {
        guard phase == .idle else { return misuse("begin") }
        phase = .awaitingAnswer
        return [.send(offer.json), .readMessage]
    }

    /// A control message arrived (nil: the stream ended before one did).
    mutating func received(_ message: JSONValue?) -> [Step] {
        switch phase {
        case .awaitingAnswer:
            guard let message else { return fail(.interrupted, "the receiver closed the stream without an answer") }
            switch TransferProtocol.Answer.parse(message) {
            case .failure(let error):
                return fail(error, reset: ExchangeReset(reason: error.message, code: .protocolError))
            case .success(.decline(let reason)):
                return fail(FileTransferError(.declined, "\(shownName) was declined: \(reason)"), reset: ExchangeReset(reason: "declined", code: .cancelled))
            case .success(.accept(let offset, let prefix)):
                guard offset <= offer.size else {
                    let error = TransferProtocol.malformed("an offset of \(offset) bytes into a file of \(offer.size)")
                    return fail(error, reset: ExchangeReset(reason: error.message, code: .protocolError))
                }
                // The receiver holds our first `offset` bytes only if they hash the same as ours.
                if offset > 0, let prefix {
                    phase = .checkingPrefix(offset: offset)
                    return [.checkPrefix(count: offset, expected: prefix.lowercased())]
                }
                return start(at: 0)
            }
        case .awaitingOutcome(let start):
            phase = .done
            guard let message else {
                return fail(.interrupted, "the receiver closed the stream without saying whether it has the file")
            }
            if let saved = message["saved"]?.stringValue { return [.saved(savedAs: saved, start: start)] }
            let reason = message["failed"]?.stringValue ?? "no reason given"
            // Only the kinds the exchange defines; anything else the peer says is an interruption.
            let kind: FileTransferError.Code =
                switch message["kind"]?.stringValue {
                case "verification": .verification
                case "file": .file
                case "declined": .declined
                default: .interrupted
                }
            return fail(kind, "the receiver did not keep \(shownName): \(reason)")
        default:
            return misuse("a message")
        }
    }

    /// The resume check's answer: whether our first bytes hash as the receiver's do.
    mutating func prefixChecked(matches: Bool) -> [Step] {
        guard case .checkingPrefix(let offset) = phase else { return misuse("a prefix check") }
        return start(at: matches ? offset : 0)
    }

    /// All the bytes went; `sha256` is the whole file's digest (lower-case hexadecimal).
    mutating func bytesSent(sha256: String) -> [Step] {
        guard case .sendingBytes(let start) = phase else { return misuse("the end of the bytes") }
        phase = .awaitingOutcome(start: start)
        return [.send(TransferProtocol.trailer(sha256: sha256)), .finishStream, .readMessage]
    }

    private mutating func start(at offset: Int64) -> [Step] {
        phase = .sendingBytes(start: offset)
        return [.send(TransferProtocol.start(offset)), .sendBytes(from: offset)]
    }

    private mutating func fail(_ code: FileTransferError.Code, _ message: String) -> [Step] {
        fail(FileTransferError(code, message), reset: nil)
    }

    private mutating func fail(_ error: FileTransferError, reset: ExchangeReset?) -> [Step] {
        phase = .done
        return [.failed(error, reset: reset)]
    }

    /// An event out of order is the shell's bug, not the peer's: it ends the exchange, loudly.
    private mutating func misuse(_ event: String) -> [Step] {
        fail(FileTransferError(.protocolError, "internal error: \(event) while \(phase)"), reset: ExchangeReset(reason: "internal error", code: .failed))
    }
}

/// A stream reset the shell sends with a failed exchange (either side).
struct ExchangeReset: Equatable, Sendable {
    var reason: String
    var code: StreamResetCode
}
