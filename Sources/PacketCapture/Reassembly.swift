/// Which datagram a fragment belongs to: IPv4 (source, destination, protocol, identification),
/// IPv6 (source, destination, identification; `protocolNumber` is 44 for all of them).
struct FragmentKey: Hashable {
    var sourceHigh: UInt64
    var sourceLow: UInt64
    var destinationHigh: UInt64
    var destinationLow: UInt64
    var identification: UInt32
    var protocolNumber: UInt8
    var isIPv6: Bool

    init(source: IPEndpoint, destination: IPEndpoint, identification: UInt32, protocolNumber: UInt8) {
        sourceHigh = source.high
        sourceLow = source.low
        destinationHigh = destination.high
        destinationLow = destination.low
        self.identification = identification
        self.protocolNumber = protocolNumber
        isIPv6 = source.isIPv6
    }
}

/// What became of a fragment.
enum FragmentOutcome {
    /// Held until the rest of its datagram arrives.
    case held
    /// It completed its datagram: the reassembled payload, the frames it came from (ascending),
    /// the protocol (IPv4) or first next header (IPv6) of the first fragment, and that
    /// fragment's hop limit.
    case completed(bytes: [UInt8], frames: [Int], firstNext: UInt8, hopLimit: Int)
    /// Its set was discarded (a problem says why).
    case discarded
}

/// Reassembles IP fragments, safely against hostile captures: conflicting overlaps discard
/// the set, a datagram may not exceed 65,535 bytes, at most ``maximumPending`` sets are held at
/// once (the oldest is evicted), and what is left at the end of the file is reported.
struct Reassembler {
    /// The most datagrams held unfinished at once.
    static let maximumPending = 64
    /// The largest datagram (IPv4 total length, IPv6 payload).
    static let maximumDatagram = 65_535

    struct Piece {
        var offset: Int
        var bytes: [UInt8]
        var end: Int { offset + bytes.count }
    }

    struct FragmentSet {
        var source: IPEndpoint
        var destination: IPEndpoint
        var identification: UInt32
        var protocolNumber: UInt8
        var pieces: [Piece] = []
        var frames: [Int] = []
        /// Where the datagram ends, once its last fragment (more-fragments clear) has arrived.
        var totalLength: Int?
        /// From the offset-0 fragment, once it has arrived.
        var firstNext: UInt8?
        var hopLimit = 0
        var storedBytes = 0
        var serial: Int
    }

    private var pending: [FragmentKey: FragmentSet] = [:]
    private var serial = 0

    /// Adds the fragment `data[start ..< end]`, at byte `offset` of its datagram.
    mutating func add(
        key: FragmentKey, _ data: [UInt8], start: Int, end: Int, offset: Int, isLast: Bool, nextHeader: UInt8,
        hopLimit: Int, headerLength: Int, frame: Int, problems: inout [CaptureProblem]
    ) -> FragmentOutcome {
        var set: FragmentSet
        if let existing = pending.removeValue(forKey: key) {
            set = existing
        } else {
            if pending.count >= Self.maximumPending { evictOldest(problems: &problems) }
            serial += 1
            set = FragmentSet(
                source: IPEndpoint(v6: key.sourceHigh, key.sourceLow, port: 0),
                destination: IPEndpoint(v6: key.destinationHigh, key.destinationLow, port: 0),
                identification: key.identification, protocolNumber: key.protocolNumber, serial: serial)
            if !key.isIPv6 {
                set.source = IPEndpoint(v4: UInt32(truncatingIfNeeded: key.sourceLow), port: 0)
                set.destination = IPEndpoint(v4: UInt32(truncatingIfNeeded: key.destinationLow), port: 0)
            }
        }
        if set.frames.last != frame { set.frames.append(frame) }
        let length = end - start
        let pieceEnd = offset + length

        if headerLength + pieceEnd > Self.maximumDatagram {
            problems.append(
                CaptureProblem(
                    .fragmentsTooLarge,
                    "\(Self.describe(set)) from frames \(set.frames) would make a datagram of \(headerLength + pieceEnd) bytes (> 65535): discarded",
                    frames: set.frames))
            return .discarded
        }
        func conflict(_ why: String) -> FragmentOutcome {
            problems.append(
                CaptureProblem(
                    .fragmentsOverlap, "overlapping \(Self.describe(set)) from frames \(set.frames) \(why): discarded",
                    frames: set.frames))
            return .discarded
        }
        if isLast {
            if let total = set.totalLength, total != pieceEnd {
                return conflict("disagree about where the datagram ends (\(total) or \(pieceEnd) bytes)")
            }
            if let beyond = set.pieces.first(where: { $0.end > pieceEnd }) {
                return conflict("disagree about where the datagram ends (\(pieceEnd) or \(beyond.end) bytes)")
            }
            set.totalLength = pieceEnd
        } else if let total = set.totalLength, pieceEnd > total {
            return conflict("disagree about where the datagram ends (\(total) or \(pieceEnd) bytes)")
        }
        var covered = false
        for piece in set.pieces {
            let low = max(piece.offset, offset)
            let high = min(piece.end, pieceEnd)
            guard low < high else { continue }
            var index = low
            while index < high {
                if piece.bytes[index - piece.offset] != data[start + index - offset] {
                    return conflict("differ (at byte \(index) of the datagram)")
                }
                index += 1
            }
            if low == offset && high == pieceEnd { covered = true }
        }
        if !covered {
            // Kept in offset order, so finding a hole needs no sort per fragment.
            var low = 0, high = set.pieces.count
            while low < high {
                let middle = (low + high) / 2
                if set.pieces[middle].offset <= offset { low = middle + 1 } else { high = middle }
            }
            set.pieces.insert(Piece(offset: offset, bytes: Array(data[start..<end])), at: low)
            set.storedBytes += length
            if set.storedBytes > 2 * Self.maximumDatagram {
                problems.append(
                    CaptureProblem(
                        .fragmentsTooLarge,
                        "\(Self.describe(set)) from frames \(set.frames) overlap so much that they hold \(set.storedBytes) bytes: discarded",
                        frames: set.frames))
                return .discarded
            }
        }
        if offset == 0 {
            set.firstNext = nextHeader
            set.hopLimit = hopLimit
        }
        if let total = set.totalLength, let firstNext = set.firstNext, Self.firstHole(set) == nil {
            var bytes = [UInt8](repeating: 0, count: total)
            for piece in set.pieces {
                let count = min(piece.bytes.count, total - piece.offset)
                if count > 0 { bytes.replaceSubrange(piece.offset..<(piece.offset + count), with: piece.bytes[0..<count]) }
            }
            return .completed(bytes: bytes, frames: set.frames.sorted(), firstNext: firstNext, hopLimit: set.hopLimit)
        }
        pending[key] = set
        return .held
    }

    /// Reports every set still unfinished at the end of the file, oldest first.
    mutating func finish(problems: inout [CaptureProblem]) {
        for set in pending.values.sorted(by: { $0.serial < $1.serial }) {
            let why: String
            if set.firstNext == nil {
                why = "the first fragment (offset 0) is missing"
            } else if set.totalLength == nil {
                why = "the last fragment (more-fragments clear) is missing"
            } else if let hole = Self.firstHole(set) {
                why = "bytes \(hole.lowerBound)..<\(hole.upperBound) are missing"
            } else {
                why = "it is incomplete"
            }
            let frames = set.frames.sorted()
            problems.append(
                CaptureProblem(
                    .fragmentsIncomplete, "\(Self.describe(set)) from frames \(frames) never completed: \(why)",
                    frames: frames))
        }
        pending.removeAll()
    }

    private mutating func evictOldest(problems: inout [CaptureProblem]) {
        guard let oldest = pending.min(by: { $0.value.serial < $1.value.serial }) else { return }
        pending.removeValue(forKey: oldest.key)
        let frames = oldest.value.frames.sorted()
        problems.append(
            CaptureProblem(
                .fragmentsEvicted,
                "\(Self.describe(oldest.value)) from frames \(frames): discarded unfinished, more than \(Self.maximumPending) datagrams were being reassembled at once",
                frames: frames))
    }

    /// The first range of bytes no piece covers, up to the known total length.
    private static func firstHole(_ set: FragmentSet) -> Range<Int>? {
        let total = set.totalLength ?? Int.max
        var cursor = 0
        for piece in set.pieces {  // in offset order
            if piece.offset > cursor { return cursor..<piece.offset }
            cursor = max(cursor, piece.end)
            if cursor >= total { return nil }
        }
        if let known = set.totalLength, cursor < known { return cursor..<known }
        return set.totalLength == nil ? cursor..<cursor : nil
    }

    /// "IPv4 fragments for id 0x1234 (198.18.1.1 → 224.0.0.251, UDP)".
    private static func describe(_ set: FragmentSet) -> String {
        let version = set.source.isIPv6 ? "IPv6" : "IPv4"
        let upper: String
        if set.source.isIPv6 {
            upper = ""
        } else {
            upper = set.protocolNumber == 17 ? ", UDP" : set.protocolNumber == 6 ? ", TCP" : ", protocol \(set.protocolNumber)"
        }
        let digits = set.source.isIPv6 ? 8 : 4
        return "\(version) fragments for id \(hex(Int(set.identification), digits: digits)) (\(set.source.addressDescription) → \(set.destination.addressDescription)\(upper))"
    }
}
