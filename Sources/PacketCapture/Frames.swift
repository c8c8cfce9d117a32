/// One network interface of a capture: what its frames are and how its time stamps count.
public struct CaptureInterface: Sendable, Equatable {
    /// The link-layer header type of every frame on this interface.
    public var linkType: LinkType
    /// The interface's name (pcapng `if_name`), if the file gives one; nil for pcap.
    public var name: String?
    /// The most bytes of each frame that were captured; 0 means no limit (pcapng).
    public var snapLength: Int
    /// Time stamp units per second: 1,000,000 for microseconds (pcap, and pcapng without
    /// `if_tsresol`), 1,000,000,000 for nanoseconds, 1,048,576 for `if_tsresol` 2^-20.
    /// Nil when `if_tsresol` names a resolution finer than 64 bits can count (its frames then
    /// have no time, and ``Capture/problems`` says so).
    public var timestampUnitsPerSecond: UInt64?
    /// Seconds added to every time stamp (pcapng `if_tsoffset`); 0 when absent.
    public var timestampOffset: Int64
    /// Bytes of frame check sequence at the end of each frame, which the reader strips before
    /// decoding (pcap's FCS bits in the link-type field, pcapng `if_fcslen`); 0 when none is
    /// known. A pcapng packet's own `epb_flags` FCS length takes precedence.
    public var fcsLength: Int
    /// Which pcapng section (0, 1, ...) the interface belongs to; always 0 for pcap.
    public var section: Int

    /// Makes an interface description.
    public init(
        linkType: LinkType, name: String? = nil, snapLength: Int = 0,
        timestampUnitsPerSecond: UInt64? = 1_000_000, timestampOffset: Int64 = 0, fcsLength: Int = 0,
        section: Int = 0
    ) {
        self.linkType = linkType
        self.name = name
        self.snapLength = snapLength
        self.timestampUnitsPerSecond = timestampUnitsPerSecond
        self.timestampOffset = timestampOffset
        self.fcsLength = fcsLength
        self.section = section
    }
}

/// A link-layer header type (libpcap's `LINKTYPE_` values), as a capture file names it.
///
/// Any value can be represented; ``isSupported`` says whether this reader decodes it.
public struct LinkType: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    /// The number in the file (pcap: the low 16 bits of the header's link-type field).
    public var rawValue: Int

    /// Makes a link type from its number.
    public init(rawValue: Int) { self.rawValue = rawValue }
    /// Makes a link type from its number.
    public init(_ rawValue: Int) { self.rawValue = rawValue }

    /// BSD loopback: a 4-byte address family in the capturing host's byte order.
    public static let null = LinkType(0)
    /// Ethernet II and IEEE 802.3 (with 802.1Q/802.1ad VLAN tags and LLC/SNAP).
    public static let ethernet = LinkType(1)
    /// Raw IP as some BSDs numbered it in old files (`DLT_RAW` = 12).
    public static let rawBSD = LinkType(12)
    /// Raw IP as OpenBSD numbered it in old files (`DLT_RAW` = 14).
    public static let rawOpenBSD = LinkType(14)
    /// Raw IP: the frame is an IPv4 or IPv6 packet, its version nibble says which.
    public static let raw = LinkType(101)
    /// IEEE 802.11 without a radio header.
    public static let ieee80211 = LinkType(105)
    /// OpenBSD loopback: like ``null`` but the address family is always big-endian.
    public static let loop = LinkType(108)
    /// Linux "cooked" capture v1 (`tcpdump -i any`): a 16-byte header.
    public static let linuxCooked = LinkType(113)
    /// IEEE 802.11 with a radiotap header in front.
    public static let radiotap = LinkType(127)
    /// Raw IPv4 only.
    public static let ipv4 = LinkType(228)
    /// Raw IPv6 only.
    public static let ipv6 = LinkType(229)
    /// Linux "cooked" capture v2 (newer `tcpdump -i any`): a 20-byte header.
    public static let linuxCooked2 = LinkType(276)

    /// Every link type this reader decodes.
    public static let supported: [LinkType] = [
        .ethernet, .linuxCooked, .linuxCooked2, .null, .loop, .raw, .rawBSD, .rawOpenBSD, .ipv4,
        .ipv6, .ieee80211, .radiotap,
    ]

    /// True when this reader decodes frames of this type.
    public var isSupported: Bool {
        switch rawValue {
        case 0, 1, 12, 14, 101, 105, 108, 113, 127, 228, 229, 276: true
        default: false
        }
    }

    /// A short name, e.g. "Ethernet"; nil for a number this reader has no name for.
    public var name: String? {
        switch rawValue {
        case 0: "BSD loopback"
        case 1: "Ethernet"
        case 9: "PPP"
        case 12, 14, 101: "raw IP"
        case 50: "PPP in HDLC framing"
        case 104: "Cisco HDLC"
        case 105: "802.11"
        case 108: "OpenBSD loopback"
        case 113: "Linux cooked"
        case 119: "802.11 Prism"
        case 127: "802.11 radiotap"
        case 163: "802.11 AVS"
        case 187: "Bluetooth HCI H4"
        case 189: "Linux USB"
        case 192: "802.11 PPI"
        case 195: "802.15.4"
        case 201: "Bluetooth HCI H4 with direction"
        case 215: "802.15.4 non-ASK PHY"
        case 220: "Linux USB (memory-mapped)"
        case 228: "raw IPv4"
        case 229: "raw IPv6"
        case 230: "802.15.4 without FCS"
        case 231: "D-Bus"
        case 249: "USBPcap"
        case 251: "Bluetooth LE link layer"
        case 253: "Linux netlink"
        case 256: "Bluetooth LE link layer with PHDR"
        case 276: "Linux cooked v2"
        case 283: "802.15.4 TAP"
        default: nil
        }
    }

    /// The name with the number, e.g. "Ethernet (1)"; "link type 999" without a name.
    public var description: String {
        if let name { return "\(name) (\(rawValue))" }
        return "link type \(rawValue)"
    }
}

/// When a frame was captured: seconds and nanoseconds since the Unix epoch (UTC).
///
/// Nanoseconds are enough for every resolution capture tools write; a finer pcapng
/// `if_tsresol` is truncated to whole nanoseconds.
public struct CaptureTime: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// Whole seconds since 1970-01-01 00:00:00 UTC (negative before).
    public var seconds: Int64
    /// Nanoseconds past ``seconds``, 0 ..< 1,000,000,000.
    public var nanoseconds: Int32

    /// Makes a time; nanoseconds outside 0 ..< 1,000,000,000 carry into the seconds.
    public init(seconds: Int64, nanoseconds: Int64 = 0) {
        var seconds = seconds
        var nanoseconds = nanoseconds
        let carry = nanoseconds / 1_000_000_000
        nanoseconds -= carry * 1_000_000_000
        seconds = seconds.addingReportingOverflow(carry).overflow ? seconds : seconds &+ carry
        if nanoseconds < 0, seconds > Int64.min {
            nanoseconds += 1_000_000_000
            seconds -= 1
        }
        self.seconds = seconds
        self.nanoseconds = Int32(clamping: max(0, nanoseconds))
    }

    /// Seconds since the epoch as one number (precise to about a microsecond today).
    public var secondsSinceEpoch: Double { Double(seconds) + Double(nanoseconds) / 1e9 }

    /// Seconds from `earlier` to this time (negative if `earlier` is later).
    public func seconds(since earlier: CaptureTime) -> Double {
        Double(seconds &- earlier.seconds) + Double(Int64(nanoseconds) - Int64(earlier.nanoseconds)) / 1e9
    }

    /// Earlier times sort first.
    public static func < (lhs: CaptureTime, rhs: CaptureTime) -> Bool {
        (lhs.seconds, lhs.nanoseconds) < (rhs.seconds, rhs.nanoseconds)
    }

    /// Seconds with nine decimals, e.g. `1700000000.123456789`.
    public var description: String {
        var fraction = String(nanoseconds)
        fraction = String(repeating: "0", count: max(0, 9 - fraction.count)) + fraction
        return "\(seconds).\(fraction)"
    }
}

/// One frame of a capture: one packet record (pcap) or packet block (pcapng).
public struct CapturedFrame: Sendable, Equatable {
    /// The frame's number: 1 for the first frame in the file, counted over the whole file
    /// (all pcapng sections), as Wireshark numbers frames.
    public var number: Int
    /// When it was captured; nil when the record has no time stamp (a pcapng Simple Packet
    /// Block) or its interface's time stamps cannot be converted.
    public var time: CaptureTime?
    /// Index into ``Capture/interfaces``; nil when the record names an interface that does not
    /// exist, or belongs to none (a pcapng custom block or systemd journal entry).
    public var interface: Int?
    /// Bytes of the frame present in the file (before an FCS is stripped).
    public var capturedLength: Int
    /// Bytes the frame had on the wire; more than ``capturedLength`` when the snap length cut it.
    public var originalLength: Int
    /// Byte offset of the frame's record or block in the file, for diagnostics.
    public var fileOffset: Int
    /// What the frame holds.
    public var content: FrameContent
    /// For a frame the snap length cut inside a UDP datagram (its ``content`` is then
    /// `.undecodable`, saying so): what it holds of that datagram, when its IP and UDP headers
    /// are whole: the endpoints and the payload bytes captured (fewer than the datagram had).
    /// Also for the first fragment of a fragmented datagram (it holds the UDP header), not for
    /// later ones.
    public var cutDatagram: UDPDatagram?

    /// Makes a frame.
    public init(
        number: Int, time: CaptureTime?, interface: Int?, capturedLength: Int, originalLength: Int,
        fileOffset: Int = 0, content: FrameContent, cutDatagram: UDPDatagram? = nil
    ) {
        self.cutDatagram = cutDatagram
        self.number = number
        self.time = time
        self.interface = interface
        self.capturedLength = capturedLength
        self.originalLength = originalLength
        self.fileOffset = fileOffset
        self.content = content
    }
}

/// What a frame holds, as far as finding UDP datagrams is concerned.
public enum FrameContent: Sendable, Equatable, CustomStringConvertible {
    /// A whole UDP datagram over IPv4 or IPv6. When it came in IP fragments, it appears at the
    /// frame that completed it and ``UDPDatagram/fragmentFrames`` lists them all.
    case udp(UDPDatagram)
    /// An IP fragment held for reassembly. Its datagram appears at the frame that completes it;
    /// a set never completed (or discarded) is listed in ``Capture/problems``.
    case fragment
    /// A frame that is not UDP over IP, in a few words: "ARP", "TCP 198.18.1.1:9099 →
    /// 198.18.1.2:443", "ICMPv6 neighbor solicitation", "802.11 beacon", "802.11 data,
    /// encrypted (protected bit)", "LLDP", "ethertype 0x88b5".
    case other(String)
    /// A frame that should hold IP or UDP but cannot be read, saying what and where, e.g.
    /// "cut short by the snap length: 96 of 1514 bytes captured" or "IPv4 header length 3
    /// words (< 5)".
    case undecodable(String)

    /// The UDP datagram, if the frame holds one.
    public var datagram: UDPDatagram? {
        if case .udp(let datagram) = self { return datagram }
        return nil
    }

    /// "UDP 198.18.1.1:5353 → 224.0.0.251:5353, 42 bytes", "IP fragment", the other words, or
    /// "undecodable: " and the reason.
    public var description: String {
        switch self {
        case .udp(let datagram): "UDP \(datagram.source) → \(datagram.destination), \(datagram.payload.count) bytes"
        case .fragment: "IP fragment"
        case .other(let words): words
        case .undecodable(let reason): "undecodable: \(reason)"
        }
    }
}

/// One whole UDP datagram.
public struct UDPDatagram: Sendable, Equatable {
    /// Where it came from.
    public var source: IPEndpoint
    /// Where it was going.
    public var destination: IPEndpoint
    /// The UDP payload (an mDNS message, for port 5353). Checksums are not verified: captures
    /// of a host's own packets often carry offloaded, not-yet-computed checksums.
    public var payload: [UInt8]
    /// Numbers of the frames it was reassembled from, ascending (the completing frame last
    /// when fragments arrived in order); empty when it was not fragmented.
    public var fragmentFrames: [Int]
    /// 802.1Q/802.1ad VLAN IDs of the frame that carried it, outermost first; empty if none.
    public var vlanTags: [Int]
    /// The IPv4 TTL or IPv6 hop limit (mDNS senders use 255; RFC 6762 section 11).
    public var hopLimit: Int

    /// Makes a datagram.
    public init(
        source: IPEndpoint, destination: IPEndpoint, payload: [UInt8], fragmentFrames: [Int] = [],
        vlanTags: [Int] = [], hopLimit: Int = 255
    ) {
        self.source = source
        self.destination = destination
        self.payload = payload
        self.fragmentFrames = fragmentFrames
        self.vlanTags = vlanTags
        self.hopLimit = hopLimit
    }
}

/// An IP address and a port.
///
/// The address is kept in two machine words, so that making one per datagram allocates
/// nothing; ``address`` gives its bytes.
public struct IPEndpoint: Sendable, Hashable, CustomStringConvertible {
    /// The first 8 bytes of an IPv6 address; 0 for IPv4.
    var high: UInt64
    /// The last 8 bytes of an IPv6 address, or the IPv4 address in the low 32 bits.
    var low: UInt64
    /// True for an IPv6 address (fixed by the address: make a new endpoint to change it).
    public internal(set) var isIPv6: Bool
    /// The UDP (or TCP) port.
    public var port: UInt16

    init(v4 address: UInt32, port: UInt16) {
        high = 0
        low = UInt64(address)
        isIPv6 = false
        self.port = port
    }

    init(v6 high: UInt64, _ low: UInt64, port: UInt16) {
        self.high = high
        self.low = low
        isIPv6 = true
        self.port = port
    }

    /// Makes an endpoint from 4 (IPv4) or 16 (IPv6) address bytes; nil for any other count.
    public init?(address: [UInt8], port: UInt16) {
        switch address.count {
        case 4:
            var value: UInt32 = 0
            for byte in address { value = value << 8 | UInt32(byte) }
            self.init(v4: value, port: port)
        case 16:
            var high: UInt64 = 0
            var low: UInt64 = 0
            for index in 0..<8 { high = high << 8 | UInt64(address[index]) }
            for index in 8..<16 { low = low << 8 | UInt64(address[index]) }
            self.init(v6: high, low, port: port)
        default:
            return nil
        }
    }

    /// The address bytes, most significant first: 4 for IPv4, 16 for IPv6.
    public var address: [UInt8] {
        if !isIPv6 { return (0..<4).map { UInt8(truncatingIfNeeded: low >> UInt64(24 - 8 * $0)) } }
        return (0..<16).map { index in
            let word = index < 8 ? high : low
            return UInt8(truncatingIfNeeded: word >> UInt64(56 - 8 * (index % 8)))
        }
    }

    /// The address as text: dotted quad, or RFC 5952 IPv6 (lower-case hex, leading zeros
    /// dropped, the longest run of two or more zero groups, the first on a tie, as `::`;
    /// IPv4-mapped addresses stay in hex, as DNSWire writes them).
    public var addressDescription: String {
        var text = TextBuffer()
        appendAddress(to: &text)
        return text.string
    }

    /// `198.18.1.1:5353` or `[fe80::1]:5353`.
    public var description: String {
        var text = TextBuffer()
        if isIPv6 { text.append(UInt8(ascii: "[")) }
        appendAddress(to: &text)
        if isIPv6 { text.append(UInt8(ascii: "]")) }
        text.append(UInt8(ascii: ":"))
        text.appendDecimal(Int(port))
        return text.string
    }

    func appendAddress(to text: inout TextBuffer) {
        if !isIPv6 {
            for index in 0..<4 {
                if index > 0 { text.append(UInt8(ascii: ".")) }
                text.appendDecimal(Int(truncatingIfNeeded: (low >> UInt64(24 - 8 * index)) & 0xFF))
            }
            return
        }
        func group(_ index: Int) -> Int {
            let word = index < 4 ? high : low
            return Int(truncatingIfNeeded: (word >> UInt64(48 - 16 * (index % 4))) & 0xFFFF)
        }
        var bestStart = -1
        var bestLength = 0
        var index = 0
        while index < 8 {
            if group(index) == 0 {
                var end = index
                while end < 8 && group(end) == 0 { end += 1 }
                if end - index >= 2 && end - index > bestLength {
                    bestStart = index
                    bestLength = end - index
                }
                index = end
            } else {
                index += 1
            }
        }
        func groups(_ range: Range<Int>) {
            for index in range {
                if index > range.lowerBound { text.append(UInt8(ascii: ":")) }
                text.appendHex(group(index))
            }
        }
        if bestStart < 0 {
            groups(0..<8)
        } else {
            groups(0..<bestStart)
            text.append(UInt8(ascii: ":"))
            text.append(UInt8(ascii: ":"))
            groups((bestStart + bestLength)..<8)
        }
    }
}

/// A small ASCII text builder (endpoints are formatted once per frame; this keeps it cheap).
struct TextBuffer {
    var bytes: [UInt8] = []

    init() { bytes.reserveCapacity(48) }

    mutating func append(_ byte: UInt8) { bytes.append(byte) }

    mutating func append(_ text: String) { bytes.append(contentsOf: text.utf8) }

    mutating func appendDecimal(_ value: Int) {
        if value < 0 {
            append(UInt8(ascii: "-"))
            appendDecimal(value == Int.min ? Int.max : -value)
            return
        }
        if value >= 10 { appendDecimal(value / 10) }
        append(UInt8(ascii: "0") + UInt8(truncatingIfNeeded: value % 10))
    }

    mutating func appendHex(_ value: Int, minimumDigits: Int = 1) {
        var shift = 60
        var started = false
        while shift >= 0 {
            let nibble = UInt8(truncatingIfNeeded: (value >> shift) & 0xF)
            if nibble != 0 || started || shift < 4 * minimumDigits {
                append(nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10)
                started = true
            }
            shift -= 4
        }
    }

    var string: String { String(decoding: bytes, as: UTF8.self) }
}
