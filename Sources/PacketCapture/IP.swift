extension FrameDecoder {
    /// An IP packet in `data[start ..< end]`; `version` is what the link layer announced (nil
    /// when only the version nibble can tell).
    mutating func ip(
        _ data: [UInt8], start: Int, end: Int, version: Int?, vlans: [Int], meta: FrameMeta,
        problems: inout [CaptureProblem]
    ) -> FrameContent {
        guard end > start else { return meta.cutShort("IP header", have: 0, need: 20, at: start) }
        let nibble = Int(data[start] >> 4)
        if let version, version != nibble {
            return .undecodable("the link layer announces IPv\(version) but the IP version is \(nibble)\(meta.at(start))")
        }
        switch nibble {
        case 4: return ipv4(data, start: start, end: end, vlans: vlans, meta: meta, problems: &problems)
        case 6: return ipv6(data, start: start, end: end, vlans: vlans, meta: meta, problems: &problems)
        default: return .undecodable("IP version \(nibble) (neither 4 nor 6)\(meta.at(start))")
        }
    }

    // MARK: IPv4

    mutating func ipv4(
        _ data: [UInt8], start: Int, end: Int, vlans: [Int], meta: FrameMeta, problems: inout [CaptureProblem]
    ) -> FrameContent {
        let present = end - start
        guard present >= 20 else { return meta.cutShort("IPv4 header", have: present, need: 20, at: start) }
        let headerLength = Int(data[start] & 0x0F) * 4
        guard headerLength >= 20 else {
            return .undecodable("IPv4 header length \(headerLength / 4) words (< 5)\(meta.at(start))")
        }
        guard headerLength <= present else {
            return meta.cutShort("IPv4 header with options", have: present, need: headerLength, at: start)
        }
        let totalLength = data.be16(start + 2)
        let datagramEnd: Int
        if totalLength == 0 {
            // Segmentation offload: the host captured its own packet before the NIC split it and
            // filled in the length. Wireshark reads on with the bytes present; so does this.
            datagramEnd = end
        } else if totalLength < headerLength {
            return .undecodable(
                "IPv4 total length \(totalLength) is less than its header length \(headerLength)\(meta.at(start))")
        } else if totalLength > present {
            if meta.truncated {
                // Whole, or the first fragment (it holds the UDP header).
                let laterFragment = data.be16(start + 6) & 0x1FFF != 0
                if !laterFragment, data[start + 9] == 17 {
                    noteCut(
                        data, udpStart: start + headerLength, end: end, source: IPEndpoint(v4: data.be32(start + 12), port: 0),
                        destination: IPEndpoint(v4: data.be32(start + 16), port: 0), hopLimit: Int(data[start + 8]), vlans: vlans)
                }
                return .undecodable(meta.snapMessage)
            }
            return .undecodable("IPv4 total length \(totalLength) exceeds the \(present) bytes present\(meta.at(start))")
        } else {
            datagramEnd = start + totalLength
        }
        let identification = data.be16(start + 4)
        let fragmentField = data.be16(start + 6)
        let moreFragments = fragmentField & 0x2000 != 0
        let fragmentOffset = (fragmentField & 0x1FFF) * 8
        let hopLimit = Int(data[start + 8])
        let protocolNumber = data[start + 9]
        let source = IPEndpoint(v4: data.be32(start + 12), port: 0)
        let destination = IPEndpoint(v4: data.be32(start + 16), port: 0)
        let payloadStart = start + headerLength

        guard moreFragments || fragmentOffset != 0 else {
            return transport(
                protocolNumber, data, start: payloadStart, end: datagramEnd, source: source, destination: destination,
                hopLimit: hopLimit, vlans: vlans, fragmentFrames: [], meta: meta)
        }
        let key = FragmentKey(source: source, destination: destination, identification: UInt32(identification),
                              protocolNumber: protocolNumber)
        let outcome = reassembler.add(
            key: key, data, start: payloadStart, end: datagramEnd, offset: fragmentOffset, isLast: !moreFragments,
            nextHeader: protocolNumber, hopLimit: hopLimit, headerLength: headerLength, frame: meta.number,
            problems: &problems)
        switch outcome {
        case .held, .discarded:
            return .fragment
        case .completed(let bytes, let frames, _, let firstHopLimit):
            // The fragments were whole, or they would not have been held.
            return transport(
                protocolNumber, bytes, start: 0, end: bytes.count, source: source, destination: destination,
                hopLimit: firstHopLimit, vlans: vlans, fragmentFrames: frames, meta: meta.reassembled)
        }
    }

    // MARK: IPv6

    mutating func ipv6(
        _ data: [UInt8], start: Int, end: Int, vlans: [Int], meta: FrameMeta, problems: inout [CaptureProblem]
    ) -> FrameContent {
        let present = end - start
        guard present >= 40 else { return meta.cutShort("IPv6 header", have: present, need: 40, at: start) }
        let payloadLength = data.be16(start + 4)
        let nextHeader = data[start + 6]
        let hopLimit = Int(data[start + 7])
        let source = IPEndpoint(v6: data.be64(start + 8), data.be64(start + 16), port: 0)
        let destination = IPEndpoint(v6: data.be64(start + 24), data.be64(start + 32), port: 0)
        let datagramEnd: Int
        if payloadLength == 0 {
            if nextHeader == 0, Self.hasJumboOption(data, at: start + 40, end: end) {
                return .undecodable("IPv6 jumbogram (payload length 0 with a Jumbo Payload option) is not supported\(meta.at(start))")
            }
            // An empty payload, or (with bytes after the header) segmentation offload: read on.
            datagramEnd = end
        } else if payloadLength > present - 40 {
            if meta.truncated {
                // Past the extension headers that may come first (and a first fragment's header).
                var header = nextHeader
                var position = start + 40
                walk: while position + 8 <= end {
                    switch header {
                    case 0, 43, 60:
                        let length = (Int(data[position + 1]) + 1) * 8
                        header = data[position]
                        position += length
                    case 44 where data.be16(position + 2) & 0xFFF8 == 0:
                        header = data[position]
                        position += 8
                    default:
                        break walk
                    }
                }
                if header == 17 {
                    noteCut(data, udpStart: position, end: end, source: source, destination: destination, hopLimit: hopLimit, vlans: vlans)
                }
                return .undecodable(meta.snapMessage)
            }
            return .undecodable(
                "IPv6 payload length \(payloadLength) exceeds the \(present - 40) bytes present\(meta.at(start))")
        } else {
            datagramEnd = start + 40 + payloadLength
        }
        let context = IPv6Context(source: source, destination: destination, hopLimit: hopLimit, vlans: vlans)
        return ipv6Headers(
            data, nextHeader: nextHeader, at: start + 40, end: datagramEnd, context: context, fragmentsAllowed: true,
            meta: meta, problems: &problems)
    }

    struct IPv6Context {
        var source: IPEndpoint
        var destination: IPEndpoint
        var hopLimit: Int
        var vlans: [Int]
        var fragmentFrames: [Int] = []
    }

    /// Walks IPv6 extension headers from `position` to the upper-layer protocol.
    mutating func ipv6Headers(
        _ data: [UInt8], nextHeader: UInt8, at position: Int, end: Int, context: IPv6Context, fragmentsAllowed: Bool,
        meta: FrameMeta, problems: inout [CaptureProblem]
    ) -> FrameContent {
        var next = nextHeader
        var position = position
        while true {
            switch next {
            case 0, 43, 60, 135, 139, 140:  // hop-by-hop, routing, destination options, mobility, HIP, shim6
                guard end - position >= 8 else {
                    return meta.cutShort("IPv6 \(Self.extensionName(next)) header", have: end - position, need: 8, at: position)
                }
                let length = (Int(data[position + 1]) + 1) * 8
                guard length <= end - position else {
                    return meta.cutShort("IPv6 \(Self.extensionName(next)) header", have: end - position, need: length, at: position)
                }
                next = data[position]
                position += length
            case 51:  // authentication header: its length counts 4-byte words, minus 2
                guard end - position >= 8 else {
                    return meta.cutShort("IPv6 authentication header", have: end - position, need: 8, at: position)
                }
                let length = (Int(data[position + 1]) + 2) * 4
                guard length <= end - position else {
                    return meta.cutShort("IPv6 authentication header", have: end - position, need: length, at: position)
                }
                next = data[position]
                position += length
            case 44:
                guard end - position >= 8 else {
                    return meta.cutShort("IPv6 fragment header", have: end - position, need: 8, at: position)
                }
                let fragmentNext = data[position]
                let field = data.be16(position + 2)
                let offset = field & 0xFFF8
                let moreFragments = field & 0x1 != 0
                let identification = data.be32(position + 4)
                position += 8
                if offset == 0 && !moreFragments {  // an atomic fragment (RFC 6946): not fragmented at all
                    next = fragmentNext
                    continue
                }
                guard fragmentsAllowed else {
                    return .undecodable("a second IPv6 fragment header inside a reassembled datagram")
                }
                let key = FragmentKey(
                    source: context.source, destination: context.destination, identification: identification,
                    protocolNumber: 44)
                let outcome = reassembler.add(
                    key: key, data, start: position, end: end, offset: offset, isLast: !moreFragments,
                    nextHeader: fragmentNext, hopLimit: context.hopLimit, headerLength: 0, frame: meta.number,
                    problems: &problems)
                switch outcome {
                case .held, .discarded:
                    return .fragment
                case .completed(let bytes, let frames, let firstNext, let firstHopLimit):
                    var inner = context
                    inner.fragmentFrames = frames
                    inner.hopLimit = firstHopLimit
                    return ipv6Headers(
                        bytes, nextHeader: firstNext, at: 0, end: bytes.count, context: inner, fragmentsAllowed: false,
                        meta: meta.reassembled, problems: &problems)
                }
            case 50:
                return .other("IPv6 ESP")
            case 59:
                return .other("IPv6, no next header")
            default:
                return transport(
                    next, data, start: position, end: end, source: context.source, destination: context.destination,
                    hopLimit: context.hopLimit, vlans: context.vlans, fragmentFrames: context.fragmentFrames, meta: meta)
            }
        }
    }

    static func extensionName(_ header: UInt8) -> String {
        switch header {
        case 0: "hop-by-hop options"
        case 43: "routing"
        case 60: "destination options"
        case 135: "mobility"
        case 139: "HIP"
        case 140: "shim6"
        default: "extension"
        }
    }

    /// True when the hop-by-hop header at `position` holds a Jumbo Payload option (type 0xC2).
    static func hasJumboOption(_ data: [UInt8], at position: Int, end: Int) -> Bool {
        guard end - position >= 8 else { return false }
        let headerEnd = min(end, position + (Int(data[position + 1]) + 1) * 8)
        var option = position + 2
        while option < headerEnd {
            let type = data[option]
            if type == 0 {  // Pad1
                option += 1
                continue
            }
            guard option + 1 < headerEnd else { return false }
            if type == 0xC2 { return true }
            option += 2 + Int(data[option + 1])
        }
        return false
    }

    // MARK: UDP and the rest

    /// Keeps what a frame cut by the snap length holds of its UDP datagram (endpoints, the
    /// payload bytes captured), when its UDP header is whole: see ``CapturedFrame/cutDatagram``.
    mutating func noteCut(
        _ data: [UInt8], udpStart: Int, end: Int, source: IPEndpoint, destination: IPEndpoint, hopLimit: Int, vlans: [Int]
    ) {
        guard udpStart >= 0, udpStart + 8 <= end, end <= data.count else { return }
        var from = source
        from.port = UInt16(truncatingIfNeeded: data.be16(udpStart))
        var to = destination
        to.port = UInt16(truncatingIfNeeded: data.be16(udpStart + 2))
        cutDatagram = UDPDatagram(
            source: from, destination: to, payload: Array(data[(udpStart + 8)..<end]), vlanTags: vlans, hopLimit: hopLimit)
    }

    /// The upper-layer protocol `protocolNumber` in `data[start ..< end]`.
    func transport(
        _ protocolNumber: UInt8, _ data: [UInt8], start: Int, end: Int, source: IPEndpoint, destination: IPEndpoint,
        hopLimit: Int, vlans: [Int], fragmentFrames: [Int], meta: FrameMeta
    ) -> FrameContent {
        let present = end - start
        switch protocolNumber {
        case 17:
            guard present >= 8 else { return meta.cutShort("UDP header", have: present, need: 8, at: start) }
            let length = data.be16(start + 4)
            guard length >= 8 else {
                if length == 0, source.isIPv6 {
                    return .undecodable("UDP length 0 (a jumbogram) is not supported\(meta.at(start))")
                }
                return .undecodable("UDP length \(length) (< 8)\(meta.at(start))")
            }
            guard length <= present else {
                if meta.truncated { return .undecodable(meta.snapMessage) }
                return .undecodable("UDP length \(length) exceeds the \(present) bytes present\(meta.at(start))")
            }
            var from = source
            from.port = UInt16(truncatingIfNeeded: data.be16(start))
            var to = destination
            to.port = UInt16(truncatingIfNeeded: data.be16(start + 2))
            return .udp(
                UDPDatagram(
                    source: from, destination: to, payload: Array(data[(start + 8)..<(start + length)]),
                    fragmentFrames: fragmentFrames, vlanTags: vlans, hopLimit: hopLimit))
        case 6:
            guard present >= 4 else { return .other("TCP") }
            var text = TextBuffer()
            text.append("TCP ")
            var from = source
            from.port = UInt16(truncatingIfNeeded: data.be16(start))
            var to = destination
            to.port = UInt16(truncatingIfNeeded: data.be16(start + 2))
            text.append(from.description)
            text.append(" → ")
            text.append(to.description)
            return .other(text.string)
        case 1:
            return .other(present >= 1 ? Self.icmpName(data[start]) : "ICMP")
        case 58:
            return .other(present >= 1 ? Self.icmpv6Name(data[start]) : "ICMPv6")
        default:
            return .other(Self.protocolName(protocolNumber))
        }
    }

    static func protocolName(_ number: UInt8) -> String {
        switch number {
        case 2: "IGMP"
        case 4: "IPv4 in IP"
        case 41: "IPv6 in IP"
        case 47: "GRE"
        case 50: "ESP"
        case 51: "AH"
        case 89: "OSPF"
        case 103: "PIM"
        case 112: "VRRP"
        case 115: "L2TP"
        case 132: "SCTP"
        case 136: "UDP-Lite"
        default: "IP protocol \(number)"
        }
    }

    static func icmpName(_ type: UInt8) -> String {
        switch type {
        case 0: "ICMP echo reply"
        case 3: "ICMP destination unreachable"
        case 5: "ICMP redirect"
        case 8: "ICMP echo request"
        case 11: "ICMP time exceeded"
        default: "ICMP"
        }
    }

    static func icmpv6Name(_ type: UInt8) -> String {
        switch type {
        case 1: "ICMPv6 destination unreachable"
        case 2: "ICMPv6 packet too big"
        case 3: "ICMPv6 time exceeded"
        case 128: "ICMPv6 echo request"
        case 129: "ICMPv6 echo reply"
        case 130: "ICMPv6 multicast listener query"
        case 131: "ICMPv6 multicast listener report"
        case 133: "ICMPv6 router solicitation"
        case 134: "ICMPv6 router advertisement"
        case 135: "ICMPv6 neighbor solicitation"
        case 136: "ICMPv6 neighbor advertisement"
        case 143: "ICMPv6 multicast listener report v2"
        default: "ICMPv6"
        }
    }
}
