package import NIOCore

/// What one side takes on streams; announced in `initialize` as the capability `streams`:
/// `{"version": 1, "window": 262144, "max_streams": 64, "max_frame": 65536}`.
public struct StreamSettings: Hashable, Sendable {
    /// Bytes the peer may send on each stream before this side grants more (its credit window):
    /// what one stream may hold in this side's memory. 4 KiB to 16 MiB; default 256 KiB (yamux's).
    public var window: Int
    /// Streams the peer may have open toward this side at once; one more is refused. 1 to 1024; default 32 (with the default window, 8 MiB at most held for a peer that reads nothing back).
    public var maximumStreams: Int
    /// The largest DATA frame this side takes, in bytes. 1 KiB to 1 MiB; default 64 KiB.
    public var maximumFrame: Int

    public init(window: Int = 256 << 10, maximumStreams: Int = 32, maximumFrame: Int = 64 << 10) {
        self.window = min(max(window, 4 << 10), 16 << 20)
        self.maximumStreams = min(max(maximumStreams, 1), 1024)
        self.maximumFrame = min(max(maximumFrame, 1 << 10), 1 << 20)
    }

    package static let version = 1
    package static let capabilityKey = "streams"

    /// What goes under `streams` in this side's capabilities.
    package var capability: JSONValue {
        .object([
            "version": .integer(Self.version), "window": .integer(window), "max_streams": .integer(maximumStreams),
            "max_frame": .integer(maximumFrame),
        ])
    }

    /// The peer's terms from its capabilities; nil when it offers no streams we speak (with why).
    package static func offered(in capabilities: JSONValue) -> Result<StreamSettings, StreamFrameError> {
        guard let offer = capabilities[capabilityKey] else { return .failure(StreamFrameError("the peer offered no streams in initialize")) }
        func integer(_ key: String) -> Int? {
            switch offer[key] {
            case .integer(let value)? where value >= 0: value
            case .number(let value)? where value == value.rounded() && value >= 0 && value <= Double(UInt32.max): Int(value)
            default: nil
            }
        }
        guard integer("version") == version else {
            return .failure(StreamFrameError("the peer offers streams of another version (\(offer["version"].map { "\($0)" } ?? "none"); this side speaks \(version))"))
        }
        guard let window = integer("window"), let streams = integer("max_streams"), let frame = integer("max_frame"), window > 0, streams > 0,
            frame >= 1 << 10
        else {
            return .failure(StreamFrameError("the peer's streams capability lacks a positive window, max_streams or max_frame (at least 1024)"))
        }
        // Taken as announced within what this side can keep track of: a smaller window or frame
        // than ours is the peer's business.
        var settings = StreamSettings()
        settings.window = min(window, Int(Int32.max))
        settings.maximumStreams = min(streams, 1 << 16)
        settings.maximumFrame = min(frame, 16 << 20)
        return .success(settings)
    }
}

/// How many stream frames and bytes a connection moved, and what it refused.
public struct StreamStatistics: Hashable, Sendable {

    package init() {
    }
    public var opened = 0
    public var accepted = 0
    /// Streams the peer opened that were refused (too many at once).
    public var refused = 0
    public var resetByPeer = 0
    public var resetHere = 0
    public var bytesSent = 0
    public var bytesReceived = 0
    /// Frames for a stream already over (reset here while they were on their way); dropped.
    public var framesAfterEnd = 0
}

/// Many byte streams on one connection, each with its own credit window, as a pure state
/// machine: frames and the app's calls in, frames to send and what to tell the app out. It
/// holds no bytes but the ones waiting for the peer's credit, and makes no I/O.
///
/// Flow control: each side grants the other, per stream, the `window` it announced; DATA
/// uses it up, and WINDOW frames give it back as the app reads (once half of it is read). A
/// slow reader thus holds back its own stream only: the connection never stops reading for
/// streams, so JSON-RPC messages pass beside a stalled stream.
package struct StreamMultiplexer {
    /// Names one write the app waits for.
    package struct WriteToken: Hashable, Sendable {
        package let value: UInt64

        package init(value: UInt64) {
            self.value = value
        }
    }

    package enum Action: Sendable {
        case send(StreamFrame)
        /// The peer opened a stream: hand it to the app.
        case accepted(StreamID, label: String)
        /// Bytes for the stream's reader.
        case deliver(StreamID, ByteBuffer)
        /// The peer finished its side: the reader ends once it has what was delivered.
        case finished(StreamID)
        /// The stream is over both ways (reset by either side, or the connection ended).
        case ended(StreamID, PeerConnectionError)
        case writeDone(WriteToken)
        case writeFailed(WriteToken, PeerConnectionError)
        /// The peer broke the streams' rules: close the connection with this code and reason.
        case closeConnection(CloseCode, String)
        case log(LogLevel, String)
    }

    private struct Stream {
        package let openedHere: Bool
        /// What we may still send (the peer's credit).
        package var sendCredit: Int
        /// What the peer may still send before we grant more.
        package var receiveCredit: Int
        /// Read by the app but not yet granted back.
        package var toGrant = 0
        /// Writes waiting for credit, oldest first; `offset` of the first is already sent.
        package var pending: [(token: WriteToken, data: ByteBuffer)] = []
        /// FIN goes out once `pending` is empty; this write waits for it.
        package var finishing: WriteToken?
        package var sentFin = false
        package var receivedFin = false
    }

    package let local: StreamSettings
    /// The connecting side opens odd-numbered streams, the accepting side even-numbered ones.
    package let opensOdd: Bool
    /// The peer's terms; nil until (and unless) both sides offered streams in `initialize`.
    package private(set) var peer: StreamSettings?
    private var whyNot = "streams are not negotiated until initialize is done"
    private var streams: [StreamID: Stream] = [:]
    private var nextLocal: UInt32
    private var lastRemote: UInt32 = 0
    private var openedByPeer = 0
    private var ended: PeerConnectionError?
    package private(set) var statistics = StreamStatistics()

    /// Refused opens after which a peer is taken to open streams without end.
    package static let refusalLimit = 1000

    package init(local: StreamSettings, connecting: Bool) {
        self.local = local
        opensOdd = connecting
        nextLocal = connecting ? 1 : 2
    }

    package var isNegotiated: Bool { peer != nil }
    package var openCount: Int { streams.count }
    /// Whether the stream is still open in at least one direction.
    package func isTracking(_ id: StreamID) -> Bool { streams[id] != nil }
    /// Set once the connection ended.
    package var endedError: PeerConnectionError? { ended }

    /// `initialize` is done: `capabilities` is what the peer announced; `offeredHere` whether
    /// this side offered streams at all.
    package mutating func negotiated(peerCapabilities capabilities: JSONValue, offeredHere: Bool = true) -> [Action] {
        guard offeredHere else {
            whyNot = "this side offers no streams"
            return []
        }
        switch StreamSettings.offered(in: capabilities) {
        case .success(let settings):
            peer = settings
            return [.log(.debug, "streams: the peer takes \(settings.maximumStreams) at once, window \(settings.window) bytes, frames up to \(settings.maximumFrame)")]
        case .failure(let why):
            whyNot = why.description
            return [.log(.debug, "no streams on this connection: \(why)")]
        }
    }

    // MARK: The app

    /// Opens a stream; the peer hears of it with the first frame.
    package mutating func open(label: String) -> Result<(StreamID, [Action]), PeerConnectionError> {
        if let ended { return .failure(ended) }
        guard let peer else { return .failure(PeerConnectionError(.unsupported, "no streams on this connection: \(whyNot)")) }
        let openHere = streams.values.filter(\.openedHere).count
        guard openHere < peer.maximumStreams else {
            return .failure(PeerConnectionError(.busy, "the peer takes at most \(peer.maximumStreams) streams at once, and that many are open"))
        }
        guard nextLocal <= UInt32.max - 2 else { return .failure(PeerConnectionError(.busy, "this connection has used up its stream numbers")) }
        let id = StreamID(nextLocal)
        nextLocal += 2
        streams[id] = Stream(openedHere: true, sendCredit: peer.window, receiveCredit: local.window)
        statistics.opened += 1
        return .success((id, [.send(.open(id, label: label))]))
    }

    /// Queues `data` for the stream; `token` is done once all of it went out within the credit.
    package mutating func write(_ id: StreamID, _ data: ByteBuffer, token: WriteToken) -> [Action] {
        guard var stream = streams[id] else { return [.writeFailed(token, overError(id))] }
        guard !stream.sentFin, stream.finishing == nil else {
            return [.writeFailed(token, PeerConnectionError(.invalidInput, "stream \(id) is finished: nothing more can be written to it"))]
        }
        stream.pending.append((token, data))
        var actions: [Action] = []
        drain(id, &stream, into: &actions)
        store(id, stream)
        return actions
    }

    /// Half-closes the stream once what was written went out; `token` is done with the FIN.
    /// A stream already over (finished both ways, or reset by either side) has nothing left to
    /// half-close, and a FIN carries no bytes: done at once, as a reset of it would be. (A peer
    /// that answered, finished and dropped its end resets it, and that reset can overtake this
    /// side's finish: the answer it sent is still read here.) Only the end of the connection fails it.
    package mutating func finish(_ id: StreamID, token: WriteToken) -> [Action] {
        guard var stream = streams[id] else {
            if let ended { return [.writeFailed(token, ended)] }
            return [.writeDone(token)]
        }
        if stream.sentFin || stream.finishing != nil { return [.writeDone(token)] }
        stream.finishing = token
        var actions: [Action] = []
        drain(id, &stream, into: &actions)
        store(id, stream)
        return actions
    }

    /// Ends the stream both ways at once, telling the peer why. Writes still waiting fail.
    package mutating func reset(_ id: StreamID, code: StreamResetCode, reason: String) -> [Action] {
        guard let stream = streams.removeValue(forKey: id) else { return [] }
        if !stream.openedHere { openedByPeer -= 1 }
        statistics.resetHere += 1
        let error = PeerConnectionError(.streamReset, "stream \(id) was reset here (\(code)\(reason.isEmpty ? "" : ": \(reason)"))")
        var actions: [Action] = [.send(.reset(id, code, reason: reason))]
        fail(stream, error, into: &actions)
        actions.append(.ended(id, error))
        return actions
    }

    /// The app read `bytes` of the stream: credit goes back to the peer once half the window is read.
    package mutating func consumed(_ id: StreamID, bytes: Int) -> [Action] {
        guard var stream = streams[id], !stream.receivedFin, bytes > 0 else { return [] }
        stream.toGrant += bytes
        var actions: [Action] = []
        if stream.toGrant >= max(1, local.window / 2) {
            let increment = stream.toGrant
            stream.receiveCredit += increment
            stream.toGrant = 0
            actions.append(.send(.window(id, increment: UInt32(increment))))
        }
        streams[id] = stream
        return actions
    }

    /// The connection ended: every stream ends with it.
    package mutating func connectionEnded(_ why: String) -> [Action] {
        guard ended == nil else { return [] }
        let error = PeerConnectionError(.closed, "the connection ended: \(why)")
        ended = error
        var actions: [Action] = []
        for (id, stream) in streams.sorted(by: { $0.key < $1.key }) {
            fail(stream, error, into: &actions)
            actions.append(.ended(id, error))
        }
        streams = [:]
        return actions
    }

    // MARK: The peer

    /// One binary message from the peer.
    package mutating func receive(_ message: ByteBuffer) -> [Action] {
        guard ended == nil else { return [] }
        guard peer != nil else {
            return [.closeConnection(CloseCode(1003), "a binary message, but no streams were negotiated (\(whyNot))")]
        }
        let frame: StreamFrame
        switch StreamFrame.parse(message) {
        case .success(let parsed): frame = parsed
        case .failure(let error): return [.closeConnection(.protocolError, error.description)]
        }
        let id = frame.stream
        if case .open(_, let label) = frame { return opened(id, label: label) }
        guard var stream = streams[id] else {
            if wasUsed(id) {
                statistics.framesAfterEnd += 1
                return [.log(.trace, "stream \(id): a frame after the stream ended here; dropped")]
            }
            return [.closeConnection(.protocolError, "a frame for stream \(id), which was never opened")]
        }
        var actions: [Action] = []
        switch frame {
        case .open:
            break
        case .data(_, let payload):
            let size = payload.readableBytes
            guard !stream.receivedFin else { return [.closeConnection(.protocolError, "stream \(id): data after its FIN")] }
            guard size <= local.maximumFrame else {
                return [.closeConnection(.protocolError, "stream \(id): a DATA frame of \(size) bytes, over the \(local.maximumFrame) this side takes")]
            }
            guard size <= stream.receiveCredit else {
                return [.closeConnection(.policyViolation, "stream \(id): \(size) bytes sent with only \(stream.receiveCredit) of window left (flow control broken)")]
            }
            stream.receiveCredit -= size
            statistics.bytesReceived += size
            if size > 0 { actions.append(.deliver(id, payload)) }
            streams[id] = stream
        case .window(_, let increment):
            // Credit beyond 2^31 bytes is as good as unlimited: it is kept at that.
            stream.sendCredit = min(stream.sendCredit + Int(increment), Int(Int32.max))
            drain(id, &stream, into: &actions)
            store(id, stream)
        case .fin:
            guard !stream.receivedFin else { return [.closeConnection(.protocolError, "stream \(id): a second FIN")] }
            stream.receivedFin = true
            actions.append(.finished(id))
            store(id, stream)
        case .reset(_, let code, let reason):
            streams[id] = nil
            if !stream.openedHere { openedByPeer -= 1 }
            statistics.resetByPeer += 1
            let error = PeerConnectionError(.streamReset, "the peer reset stream \(id) (\(code)\(reason.isEmpty ? "" : ": \(reason)"))")
            fail(stream, error, into: &actions)
            actions.append(.ended(id, error))
        }
        return actions
    }

    private mutating func opened(_ id: StreamID, label: String) -> [Action] {
        guard (id.value % 2 == 1) != opensOdd else {
            return [.closeConnection(.protocolError, "the peer opened stream \(id), a number this side opens with")]
        }
        guard id.value > lastRemote else {
            return [.closeConnection(.protocolError, "the peer opened stream \(id) again, or out of order (after \(lastRemote))")]
        }
        lastRemote = id.value
        guard openedByPeer < local.maximumStreams else {
            statistics.refused += 1
            if statistics.refused >= Self.refusalLimit {
                return [.closeConnection(.policyViolation, "the peer opened streams without end (\(statistics.refused) refused, at most \(local.maximumStreams) at once)")]
            }
            return [
                .send(.reset(id, .refused, reason: "too many streams at once (at most \(local.maximumStreams))")),
                .log(.info, "stream \(id) refused: the peer has \(openedByPeer) open, the most this side takes"),
            ]
        }
        guard let peer else { return [] }
        openedByPeer += 1
        statistics.accepted += 1
        streams[id] = Stream(openedHere: false, sendCredit: peer.window, receiveCredit: local.window)
        return [.accepted(id, label: label)]
    }

    // MARK: Helpers

    /// Sends what the credit allows, in frames the peer takes; then the FIN if one waits.
    private mutating func drain(_ id: StreamID, _ stream: inout Stream, into actions: inout [Action]) {
        let frame = peer?.maximumFrame ?? local.maximumFrame
        while !stream.pending.isEmpty {
            let remaining = stream.pending[0].data.readableBytes
            if remaining == 0 {
                actions.append(.writeDone(stream.pending.removeFirst().token))
                continue
            }
            guard stream.sendCredit > 0 else { break }
            let size = min(remaining, stream.sendCredit, frame)
            guard let chunk = stream.pending[0].data.readSlice(length: size) else { break }
            stream.sendCredit -= size
            statistics.bytesSent += size
            actions.append(.send(.data(id, chunk)))
        }
        if stream.pending.isEmpty, let token = stream.finishing, !stream.sentFin {
            stream.sentFin = true
            stream.finishing = nil
            actions.append(.send(.fin(id)))
            actions.append(.writeDone(token))
        }
    }

    /// Keeps the stream, or lets it go once both sides finished.
    private mutating func store(_ id: StreamID, _ stream: Stream) {
        if stream.sentFin && stream.receivedFin {
            streams[id] = nil
            if !stream.openedHere { openedByPeer -= 1 }
        } else {
            streams[id] = stream
        }
    }

    private func fail(_ stream: Stream, _ error: PeerConnectionError, into actions: inout [Action]) {
        for write in stream.pending { actions.append(.writeFailed(write.token, error)) }
        if let token = stream.finishing { actions.append(.writeFailed(token, error)) }
    }

    /// A stream number that was in use once (its frames may still be on their way).
    private func wasUsed(_ id: StreamID) -> Bool {
        if (id.value % 2 == 1) == opensOdd { return id.value < nextLocal }
        return id.value <= lastRemote
    }

    private func overError(_ id: StreamID) -> PeerConnectionError {
        ended ?? PeerConnectionError(.streamReset, "stream \(id) is over (reset, or finished both ways)")
    }
}
