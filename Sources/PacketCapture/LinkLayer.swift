/// What the decoder knows about the frame in hand, for its messages.
struct FrameMeta {
    /// The frame's number.
    var number: Int
    /// Where the frame's bytes start in the buffer (for "at byte N of the frame").
    var start: Int
    /// Bytes present in the file.
    var captured: Int
    /// Bytes the frame had on the wire.
    var original: Int
    /// What positions are counted from: the frame, or a datagram reassembled from fragments.
    var place = "frame"

    /// True when the snap length cut the frame.
    var truncated: Bool { captured < original }

    /// ", at byte 14 of the frame".
    func at(_ position: Int) -> String { ", at byte \(position - start) of the \(place)" }

    /// The same frame, but positions now count in a reassembled datagram, which is whole.
    var reassembled: FrameMeta {
        var meta = self
        meta.start = 0
        meta.captured = meta.original
        meta.place = "reassembled datagram"
        return meta
    }

    /// Why a header or datagram that needs `need` bytes where `have` are present cannot be
    /// read: the snap length when it cut the frame, otherwise the header itself.
    func cutShort(_ what: String, have: Int, need: Int, at position: Int) -> FrameContent {
        if truncated { return .undecodable(snapMessage) }
        return .undecodable("\(what) cut short: \(need) bytes needed, \(max(0, have)) present\(at(position))")
    }

    var snapMessage: String { "cut short by the snap length: \(captured) of \(original) bytes captured" }
}

/// Where the link layer says the network layer starts, or what the frame is instead.
enum LinkResult {
    /// An IP packet in `start ..< end`; `version` is what the link layer said (nil: either).
    case network(start: Int, end: Int, version: Int?)
    /// The frame is not IP, or cannot be read.
    case done(FrameContent)
}

/// Decodes one frame from the link layer up to UDP, holding fragments across frames.
struct FrameDecoder {
    var reassembler = Reassembler()
    /// What the frame being decoded holds of a UDP datagram the snap length cut, if anything.
    var cutDatagram: UDPDatagram?

    /// Decodes `data[start ..< end]`, a frame of `linkType` (already checked to be supported).
    mutating func decode(
        _ data: [UInt8], start: Int, end: Int, linkType: LinkType, meta: FrameMeta,
        problems: inout [CaptureProblem]
    ) -> FrameContent {
        var vlans: [Int] = []
        let result: LinkResult
        switch linkType.rawValue {
        case 1: result = Self.ethernet(data, start: start, end: end, vlans: &vlans, meta: meta)
        case 113: result = Self.linuxCooked(data, start: start, end: end, vlans: &vlans, meta: meta)
        case 276: result = Self.linuxCooked2(data, start: start, end: end, vlans: &vlans, meta: meta)
        case 0: result = Self.loopback(data, start: start, end: end, bothOrders: true, meta: meta)
        case 108: result = Self.loopback(data, start: start, end: end, bothOrders: false, meta: meta)
        case 12, 14, 101: result = .network(start: start, end: end, version: nil)
        case 228: result = .network(start: start, end: end, version: 4)
        case 229: result = .network(start: start, end: end, version: 6)
        case 105:
            result = Self.ieee80211(data, start: start, end: end, dataPad: false, vlans: &vlans, meta: meta)
        case 127: result = Self.radiotap(data, start: start, end: end, vlans: &vlans, meta: meta)
        default: return .undecodable("\(linkType) is not supported")
        }
        switch result {
        case .done(let content):
            return content
        case .network(let ipStart, let ipEnd, let version):
            return ip(data, start: ipStart, end: ipEnd, version: version, vlans: vlans, meta: meta, problems: &problems)
        }
    }

    // MARK: Ethernet and what follows an ethertype

    static func ethernet(_ data: [UInt8], start: Int, end: Int, vlans: inout [Int], meta: FrameMeta) -> LinkResult {
        guard end - start >= 14 else {
            return .done(meta.cutShort("Ethernet header", have: end - start, need: 14, at: start))
        }
        return ethertype(data.be16(start + 12), data, at: start + 14, end: end, lengthMeansLLC: true, vlans: &vlans, meta: meta)
    }

    /// Follows an ethertype (through VLAN tags and, where `lengthMeansLLC`, an 802.3 length
    /// field with LLC/SNAP) to IP or to a name for what the frame is.
    static func ethertype(
        _ type: Int, _ data: [UInt8], at position: Int, end: Int, lengthMeansLLC: Bool,
        vlans: inout [Int], meta: FrameMeta
    ) -> LinkResult {
        var type = type
        var position = position
        var end = end
        var lengthMeansLLC = lengthMeansLLC
        while true {
            switch type {
            case 0x0800:
                return .network(start: position, end: end, version: 4)
            case 0x86DD:
                return .network(start: position, end: end, version: 6)
            case 0x8100, 0x88A8, 0x9100, 0x9200:
                guard end - position >= 4 else {
                    return .done(meta.cutShort("VLAN tag", have: end - position, need: 4, at: position))
                }
                vlans.append(data.be16(position) & 0x0FFF)
                type = data.be16(position + 2)
                position += 4
            case 0...1500 where lengthMeansLLC:
                // IEEE 802.3: a length, then LLC. The length bounds the payload (the rest is padding).
                if type < end - position { end = position + type }
                switch llc(data, at: position, end: end, meta: meta) {
                case .snap(let next):
                    type = next
                    position += 8
                    lengthMeansLLC = false
                case .done(let content):
                    return .done(content)
                }
            case 1501...1535:
                return .done(.other("ethertype \(hex(type)) (neither a length nor a type)"))
            default:
                return .done(.other(ethertypeName(type)))
            }
        }
    }

    enum LLCResult {
        case snap(Int)
        case done(FrameContent)
    }

    /// An 802.2 LLC header at `position`: SNAP with an ethertype, or a name for what it is.
    static func llc(_ data: [UInt8], at position: Int, end: Int, meta: FrameMeta) -> LLCResult {
        guard end - position >= 3 else {
            return .done(meta.cutShort("LLC header", have: end - position, need: 3, at: position))
        }
        let dsap = data[position]
        let ssap = data[position + 1]
        let control = data[position + 2]
        if dsap == 0xAA, ssap == 0xAA, control == 0x03 {
            guard end - position >= 8 else {
                return .done(meta.cutShort("SNAP header", have: end - position, need: 8, at: position))
            }
            let oui = Int(data[position + 3]) << 16 | Int(data[position + 4]) << 8 | Int(data[position + 5])
            let protocolID = data.be16(position + 6)
            if oui == 0 || oui == 0xF8 { return .snap(protocolID) }
            if oui == 0x00000C, protocolID == 0x2000 { return .done(.other("CDP")) }
            return .done(.other("SNAP, OUI \(hex(oui, digits: 6)), protocol \(hex(protocolID))"))
        }
        switch dsap {
        case 0x42: return .done(.other("STP"))
        case 0xE0: return .done(.other("IPX"))
        case 0xF0: return .done(.other("NetBIOS"))
        case 0xFE: return .done(.other("OSI"))
        default: return .done(.other("LLC, DSAP \(hex(Int(dsap), digits: 2))"))
        }
    }

    static func ethertypeName(_ type: Int) -> String {
        switch type {
        case 0x0806: "ARP"
        case 0x0842: "Wake-on-LAN"
        case 0x22F0: "AVTP"
        case 0x22EA: "SRP"
        case 0x8035: "RARP"
        case 0x809B: "AppleTalk"
        case 0x80F3: "AARP"
        case 0x8137: "IPX"
        case 0x8808: "Ethernet flow control"
        case 0x8809: "slow protocols (LACP)"
        case 0x8847: "MPLS"
        case 0x8848: "MPLS multicast"
        case 0x8863: "PPPoE discovery"
        case 0x8864: "PPPoE session"
        case 0x886D: "Intel ANS"
        case 0x887B: "HomePlug"
        case 0x888E: "EAPOL"
        case 0x8892: "PROFINET"
        case 0x8899: "Realtek"
        case 0x88A4: "EtherCAT"
        case 0x88B8: "GOOSE"
        case 0x88CC: "LLDP"
        case 0x88E1: "HomePlug AV"
        case 0x88E5: "MACsec"
        case 0x88F7: "PTP"
        case 0x8902: "CFM"
        case 0x893A: "IEEE 1905.1"
        case 0x9000: "Ethernet loopback (CTP)"
        default: "ethertype \(hex(type))"
        }
    }

    // MARK: Linux cooked captures

    /// `tcpdump -i any` v1: packet type, ARPHRD type, address length, 8 address bytes, protocol.
    static func linuxCooked(_ data: [UInt8], start: Int, end: Int, vlans: inout [Int], meta: FrameMeta) -> LinkResult {
        guard end - start >= 16 else {
            return .done(meta.cutShort("Linux cooked header", have: end - start, need: 16, at: start))
        }
        return cookedProtocol(
            data.be16(start + 14), hardware: data.be16(start + 2), data, at: start + 16, end: end, vlans: &vlans, meta: meta)
    }

    /// v2: protocol, reserved, interface index, ARPHRD type, packet type, address length, 8
    /// address bytes.
    static func linuxCooked2(_ data: [UInt8], start: Int, end: Int, vlans: inout [Int], meta: FrameMeta) -> LinkResult {
        guard end - start >= 20 else {
            return .done(meta.cutShort("Linux cooked v2 header", have: end - start, need: 20, at: start))
        }
        return cookedProtocol(
            data.be16(start), hardware: data.be16(start + 8), data, at: start + 20, end: end, vlans: &vlans, meta: meta)
    }

    static func cookedProtocol(
        _ protocolType: Int, hardware: Int, _ data: [UInt8], at position: Int, end: Int, vlans: inout [Int],
        meta: FrameMeta
    ) -> LinkResult {
        if hardware == 824 { return .done(.other("netlink")) }  // ARPHRD_NETLINK: the protocol is a netlink family
        switch protocolType {
        case 0x0004:  // ETH_P_802_2: an LLC header follows, no length
            switch llc(data, at: position, end: end, meta: meta) {
            case .snap(let next):
                return ethertype(next, data, at: position + 8, end: end, lengthMeansLLC: false, vlans: &vlans, meta: meta)
            case .done(let content):
                return .done(content)
            }
        case 0x0001: return .done(.other("IPX (Novell 802.3)"))
        case 0...1535: return .done(.other("Linux cooked protocol \(hex(protocolType))"))
        default:
            return ethertype(protocolType, data, at: position, end: end, lengthMeansLLC: false, vlans: &vlans, meta: meta)
        }
    }

    // MARK: Loopback

    /// BSD loopback (`NULL`, the family in the capturing host's byte order, so both orders are
    /// tried) and OpenBSD `LOOP` (always big-endian).
    static func loopback(_ data: [UInt8], start: Int, end: Int, bothOrders: Bool, meta: FrameMeta) -> LinkResult {
        guard end - start >= 4 else {
            return .done(meta.cutShort("loopback header", have: end - start, need: 4, at: start))
        }
        func version(_ family: UInt32) -> Int? {
            switch family {
            case 2: 4
            case 10, 23, 24, 28, 30: 6  // Linux, Windows, NetBSD/OpenBSD, FreeBSD, Darwin
            default: nil
            }
        }
        let big = data.be32(start)
        let little = data.le32(start)
        if let ipVersion = version(big) {
            return .network(start: start + 4, end: end, version: ipVersion)
        }
        if bothOrders, let ipVersion = version(little) {
            return .network(start: start + 4, end: end, version: ipVersion)
        }
        let family = bothOrders ? min(big, little) : big
        return .done(.other("loopback, address family \(family)"))
    }
}
