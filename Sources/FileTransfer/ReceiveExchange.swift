import PeerConnection

/// The receiving side of one file's exchange (see ``TransferProtocol``) as a pure machine: which
/// offers are declined and why, what the answer says, which start is allowed, whether the
/// bytes are the sender's, and what the sender is told at the end. The shell (`FileReceiver`)
/// does the file work it asks for (claiming a `.part`, hashing, the free space, writing,
/// publishing) and reports back, so every rule is tested without a stream or a disk
/// (`ReceiveExchangeTests`).
///
/// The order: ``begin()``; control messages to ``received(_:)``; then, as asked,
/// ``claimed(_:)``, ``prefixHashed(_:)``, ``spaceChecked(free:)``, ``bytesReceived(sha256:)``
/// and ``published(_:)``.
struct ReceiveExchange: Sendable {
    enum Step: Equatable, Sendable {
        /// Read the next control message and give it to ``received(_:)``.
        case readMessage
        /// Find where the offered file goes (folders, a free name, a `.part` to resume from)
        /// and give the outcome to ``claimed(_:)``.
        case claim(TransferProtocol.Offer)
        /// Hash the `.part`'s first `count` bytes into the file's hash and give the digest to
        /// ``prefixHashed(_:)``.
        case hashPrefix(count: Int64)
        /// Look up the free space where the file goes and give it to ``spaceChecked(free:)``.
        case checkSpace
        /// Write this control message; failing to write interrupts the exchange.
        case send(JSONValue)
        /// Open the `.part` at `start` (hashing again from nothing when `start` is 0), take the
        /// bytes up to the offered size, then give their SHA-256 to ``bytesReceived(sha256:)``.
        case receiveBytes(from: Int64)
        /// The bytes are not the sender's: delete the `.part`.
        case discardPart
        /// Move the `.part` to its final name and give the outcome to ``published(_:)``.
        case publish
        /// Say this last word to the sender and half-close, both best effort: what happened
        /// here holds whether or not the sender still listens.
        case tellAndFinish(JSONValue)
        /// Saved under `savedAs` (folders joined with `/`); the bytes from `start` came this time.
        case saved(savedAs: String, start: Int64)
        /// The exchange failed; with `reset`, the shell resets the stream with that reason and code.
        case failed(FileTransferError, reset: ExchangeReset?)
    }

    enum Phase: Equatable, Sendable {
        case awaitingOffer
        case claiming
        case hashingPrefix
        case checkingSpace
        case awaitingStart
        case receiving(start: Int64)
        case awaitingTrailer(start: Int64, digest: String)
        case publishing(start: Int64)
        case done
    }

    /// The largest file taken (nil: the free space decides).
    let maximumSize: Int64?
    private(set) var phase: Phase = .awaitingOffer
    private(set) var offer: TransferProtocol.Offer?
    /// The name with its folders, as messages show it (cleaned of control characters).
    private(set) var shownName = ""
    /// Bytes of the `.part` offered for a resume, and their SHA-256.
    private var offset: Int64 = 0
    private var prefix: String?

    init(maximumSize: Int64?) {
        self.maximumSize = maximumSize
    }

    mutating func begin() -> [Step] { [.readMessage] }

    /// A control message arrived (nil: the stream ended first).
    mutating func received(_ message: JSONValue?) -> [Step] {
        switch phase {
        case .awaitingOffer:
            guard let message else { return protocolError(TransferProtocol.malformed("no offer before the stream ended")) }
            let offer: TransferProtocol.Offer
            switch TransferProtocol.Offer.parse(message) {
            case .failure(let error): return protocolError(error)
            case .success(let parsed): offer = parsed
            }
            self.offer = offer
            shownName = FileNames.shown((offer.folders + [offer.name]).joined(separator: "/"))
            if let problem = FileNames.problem(withPath: offer.folders + [offer.name]) { return decline("refused name: \(problem)") }
            if let maximumSize, offer.size > maximumSize { return decline("\(offer.size) bytes is over the \(maximumSize) this side takes") }
            phase = .claiming
            return [.claim(offer)]
        case .awaitingStart:
            guard let message, let start = TransferProtocol.integer(message["start"]), start == 0 || start == offset else {
                return protocolError(TransferProtocol.malformed("a start that is neither 0 nor the offset offered"))
            }
            phase = .receiving(start: start)
            return [.receiveBytes(from: start)]
        case .awaitingTrailer(let start, let digest):
            guard let message, let theirs = message["sha256"]?.stringValue?.lowercased() else {
                return protocolError(TransferProtocol.malformed("no SHA-256 after the bytes"))
            }
            guard theirs == digest else {
                // Not the sender's file: nothing of it is kept.
                phase = .done
                let reason = "its SHA-256 differs from the sender's (\(digest.prefix(16))… here, \(theirs.prefix(16))… sent); nothing was kept"
                return [
                    .discardPart, .tellAndFinish(TransferProtocol.failed(reason, kind: .verification)),
                    .failed(FileTransferError(.verification, "\(shownName): \(reason)"), reset: nil),
                ]
            }
            phase = .publishing(start: start)
            return [.publish]
        default:
            return misuse("a message")
        }
    }

    /// Where the file goes: the `.part`'s bytes to resume from (0 for a new file), or why it
    /// cannot be placed (the receiver then declines with that reason).
    mutating func claimed(_ outcome: Result<Int64, FileTransferError>) -> [Step] {
        guard phase == .claiming else { return misuse("a claim") }
        switch outcome {
        case .failure(let error):
            return decline(error.message)
        case .success(let offset):
            self.offset = offset
            if offset > 0 {
                phase = .hashingPrefix
                return [.hashPrefix(count: offset)]
            }
            phase = .checkingSpace
            return [.checkSpace]
        }
    }

    /// The `.part`'s first bytes hashed (lower-case hexadecimal), for the sender to compare.
    mutating func prefixHashed(_ digest: String) -> [Step] {
        guard phase == .hashingPrefix else { return misuse("a prefix digest") }
        prefix = digest
        phase = .checkingSpace
        return [.checkSpace]
    }

    /// The free space where the file goes (nil: unknown, taken as enough).
    mutating func spaceChecked(free: Int64?) -> [Step] {
        guard phase == .checkingSpace, let offer else { return misuse("the free space") }
        let needed = offer.size - offset
        if let free, needed > free { return decline("not enough space: \(needed) bytes needed, \(free) free") }
        phase = .awaitingStart
        return [.send(TransferProtocol.Answer.accept(offset: offset, prefixSHA256: prefix).json), .readMessage]
    }

    /// All the offered bytes arrived; `sha256` is the whole file's digest (lower-case hexadecimal).
    mutating func bytesReceived(sha256: String) -> [Step] {
        guard case .receiving(let start) = phase else { return misuse("the end of the bytes") }
        phase = .awaitingTrailer(start: start, digest: sha256)
        return [.readMessage]
    }

    /// The file under its final name (its folders and name), or why it could not be saved.
    mutating func published(_ outcome: Result<[String], FileTransferError>) -> [Step] {
        guard case .publishing(let start) = phase else { return misuse("a publication") }
        phase = .done
        switch outcome {
        case .success(let path):
            let saved = path.joined(separator: "/")
            return [.tellAndFinish(TransferProtocol.saved(saved)), .saved(savedAs: saved, start: start)]
        case .failure(let error):
            return [.tellAndFinish(TransferProtocol.failed(error.message, kind: .file)), .failed(error, reset: nil)]
        }
    }

    private mutating func decline(_ reason: String) -> [Step] {
        phase = .done
        return [
            .tellAndFinish(TransferProtocol.Answer.decline(reason).json),
            .failed(FileTransferError(.declined, "declined \(shownName): \(reason)"), reset: nil),
        ]
    }

    private mutating func protocolError(_ error: FileTransferError) -> [Step] {
        phase = .done
        return [.failed(error, reset: ExchangeReset(reason: error.message, code: .protocolError))]
    }

    /// An event out of order is the shell's bug, not the peer's: it ends the exchange, loudly.
    private mutating func misuse(_ event: String) -> [Step] {
        let phase = self.phase
        self.phase = .done
        return [.failed(FileTransferError(.protocolError, "internal error: \(event) while \(phase)"), reset: ExchangeReset(reason: "internal error", code: .failed))]
    }
}
