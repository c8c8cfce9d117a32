extension FrameDecoder {
    /// A radiotap header (version 0: version, pad, little-endian length, presence bitmaps
    /// chained by bit 31, then the fields), then an 802.11 frame.
    ///
    /// Only the Flags field matters here: it is the second field (bit 1), after TSFT (bit 0,
    /// 8 bytes, 8-byte aligned from the start of the header). Flag 0x10 says the frame ends
    /// with a 4-byte FCS (stripped), 0x20 that the 802.11 header is padded to 4 bytes, 0x40 that
    /// the FCS was bad.
    static func radiotap(_ data: [UInt8], start: Int, end: Int, vlans: inout [Int], meta: FrameMeta) -> LinkResult {
        guard end - start >= 8 else {
            return .done(meta.cutShort("radiotap header", have: end - start, need: 8, at: start))
        }
        let version = data[start]
        guard version == 0 else { return .done(.undecodable("radiotap version \(version) (only 0 is known)\(meta.at(start))")) }
        let length = data.le16(start + 2)
        guard length >= 8 else { return .done(.undecodable("radiotap length \(length) (< 8)\(meta.at(start))")) }
        guard length <= end - start else {
            return .done(meta.cutShort("radiotap header", have: end - start, need: length, at: start))
        }
        let firstPresent = data.le32(start + 4)
        var word = firstPresent
        var position = start + 4
        while word & 0x8000_0000 != 0 {
            position += 4
            guard position + 4 <= start + length else {
                return .done(.undecodable("radiotap presence bitmaps run past its length \(length)\(meta.at(start))"))
            }
            word = data.le32(position)
        }
        var field = position + 4 - start  // offset of the first field from the header's start
        var flags: UInt8 = 0
        if firstPresent & 0x1 != 0 {  // TSFT: u64, 8-byte aligned
            field = (field + 7) & ~7
            field += 8
        }
        if firstPresent & 0x2 != 0 {
            guard field < length else {
                return .done(.undecodable("radiotap Flags field lies past its length \(length)\(meta.at(start))"))
            }
            flags = data[start + field]
        }
        if flags & 0x40 != 0 { return .done(.undecodable("bad FCS (radiotap flags)")) }
        var frameEnd = end
        if flags & 0x10 != 0 {
            // The FCS is the last 4 bytes on the air; only the part that was captured is here.
            let missing = max(0, meta.original - meta.captured)
            let present = max(0, 4 - missing)
            frameEnd = max(start + length, end - present)
        }
        return ieee80211(data, start: start + length, end: frameEnd, dataPad: flags & 0x20 != 0, vlans: &vlans, meta: meta)
    }

    /// An IEEE 802.11 frame: only data frames can carry IP, in an LLC/SNAP header.
    static func ieee80211(
        _ data: [UInt8], start: Int, end: Int, dataPad: Bool, vlans: inout [Int], meta: FrameMeta
    ) -> LinkResult {
        guard end - start >= 2 else {
            return .done(meta.cutShort("802.11 header", have: end - start, need: 2, at: start))
        }
        let control = data[start]
        let flags = data[start + 1]
        let version = control & 0x3
        let type = (control >> 2) & 0x3
        let subtype = control >> 4
        guard version == 0 else { return .done(.other("802.11, protocol version \(version)")) }
        switch type {
        case 0: return .done(.other(managementName(subtype)))
        case 1: return .done(.other(controlName(subtype)))
        case 3: return .done(.other("802.11 extension"))
        default: break
        }
        if subtype & 0x4 != 0 { return .done(.other("802.11 null data")) }
        if flags & 0x40 != 0 { return .done(.other("802.11 data, encrypted (protected bit)")) }
        var header = 24
        if flags & 0x03 == 0x03 { header += 6 }  // ToDS and FromDS: a fourth address
        let qos = subtype & 0x8 != 0
        let qosOffset = header
        if qos {
            header += 2
            if flags & 0x80 != 0 { header += 4 }  // order bit on a QoS frame: HT control
        }
        guard end - start >= header else {
            return .done(meta.cutShort("802.11 data header", have: end - start, need: header, at: start))
        }
        if qos, data[start + qosOffset] & 0x80 != 0 {
            return .done(.other("802.11 A-MSDU (aggregated frames are not decoded)"))
        }
        if flags & 0x04 != 0 || data[start + 22] & 0x0F != 0 {
            return .done(.other("802.11 data fragment"))
        }
        let body = dataPad ? start + ((header + 3) & ~3) : start + header
        guard end - body >= 8 else {
            if meta.truncated { return .done(.undecodable(meta.snapMessage)) }
            return .done(.other("802.11 data without a SNAP header"))
        }
        switch llc(data, at: body, end: end, meta: meta) {
        case .snap(let next):
            return ethertype(next, data, at: body + 8, end: end, lengthMeansLLC: false, vlans: &vlans, meta: meta)
        case .done(let content):
            return .done(content)
        }
    }

    static func managementName(_ subtype: UInt8) -> String {
        switch subtype {
        case 0: "802.11 association request"
        case 1: "802.11 association response"
        case 2: "802.11 reassociation request"
        case 3: "802.11 reassociation response"
        case 4: "802.11 probe request"
        case 5: "802.11 probe response"
        case 6: "802.11 timing advertisement"
        case 8: "802.11 beacon"
        case 9: "802.11 ATIM"
        case 10: "802.11 disassociation"
        case 11: "802.11 authentication"
        case 12: "802.11 deauthentication"
        case 13: "802.11 action"
        case 14: "802.11 action, no ack"
        default: "802.11 management"
        }
    }

    static func controlName(_ subtype: UInt8) -> String {
        switch subtype {
        case 8: "802.11 block ack request"
        case 9: "802.11 block ack"
        case 10: "802.11 PS-Poll"
        case 11: "802.11 RTS"
        case 12: "802.11 CTS"
        case 13: "802.11 ACK"
        case 14: "802.11 CF-End"
        default: "802.11 control"
        }
    }
}
