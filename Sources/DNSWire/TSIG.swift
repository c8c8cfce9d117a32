// Transaction signatures (RFC 8945): the codec's half. Which bytes a MAC covers, the TSIG record
// on the wire, and finding it at the end of a received message. The MAC itself (HMAC-SHA256) is
// computed by the caller, so the codec stays free of cryptography and I/O.

/// The TSIG pseudo-record (RFC 8945 §4.2): a message's signature and what it was made with.
public struct TSIGRecord: Hashable, Sendable {
    /// The key's name, which is the record's owner name.
    public var keyName: DomainName
    /// The MAC algorithm, e.g. ``TSIGRecord/hmacSHA256``.
    public var algorithm: DomainName
    /// When the message was signed, in seconds since 1970 (48 bits on the wire).
    public var timeSigned: UInt64
    /// Seconds of clock difference the signer allows.
    public var fudge: UInt16
    /// The MAC; empty in an error response to a signature the server could not check.
    public var mac: [UInt8]
    /// The message ID the signer used (a forwarder may change the header's).
    public var originalID: UInt16
    /// The TSIG error: ``ResponseCode/badSignature``, ``ResponseCode/badKey``, ``ResponseCode/badTime`` or NOERROR.
    public var error: ResponseCode
    /// With BADTIME, the server's clock (6 bytes); otherwise empty.
    public var otherData: [UInt8]

    /// `hmac-sha256.`, the algorithm `tsig-keygen` uses by default and RFC 8945 requires.
    public static let hmacSHA256: DomainName = "hmac-sha256."

    public init(
        keyName: DomainName, algorithm: DomainName = TSIGRecord.hmacSHA256, timeSigned: UInt64, fudge: UInt16 = 300,
        mac: [UInt8], originalID: UInt16, error: ResponseCode = .noError, otherData: [UInt8] = []
    ) {
        self.keyName = keyName
        self.algorithm = algorithm
        self.timeSigned = timeSigned
        self.fudge = fudge
        self.mac = mac
        self.originalID = originalID
        self.error = error
        self.otherData = otherData
    }

    /// With BADTIME, the server's time from ``otherData``, in seconds since 1970.
    public var serverTime: UInt64? {
        guard otherData.count == 6 else { return nil }
        return otherData.reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// The RDATA, names uncompressed (RFC 8945 §4.2).
    public var rdata: [UInt8] {
        var bytes = algorithm.canonicalWire
        appendUInt48(timeSigned, to: &bytes)
        appendUInt16(fudge, to: &bytes)
        appendUInt16(UInt16(truncatingIfNeeded: mac.count), to: &bytes)
        bytes += mac
        appendUInt16(originalID, to: &bytes)
        appendUInt16(error.rawValue, to: &bytes)
        appendUInt16(UInt16(truncatingIfNeeded: otherData.count), to: &bytes)
        return bytes + otherData
    }

    /// Reads the RDATA of a TSIG record owned by `keyName`; nil when it is malformed.
    public init?(keyName: DomainName, rdata: [UInt8]) {
        guard let (algorithm, end) = DomainName.readUncompressed(rdata, at: 0) else { return nil }
        var index = end
        func take(_ count: Int) -> ArraySlice<UInt8>? {
            guard index + count <= rdata.count else { return nil }
            defer { index += count }
            return rdata[index..<(index + count)]
        }
        func number(_ count: Int) -> UInt64? { take(count)?.reduce(0) { $0 << 8 | UInt64($1) } }
        guard let time = number(6), let fudge = number(2), let macSize = number(2), let mac = take(Int(macSize)),
            let originalID = number(2), let error = number(2), let otherSize = number(2), let other = take(Int(otherSize)),
            index == rdata.count
        else { return nil }
        self.init(
            keyName: keyName, algorithm: algorithm, timeSigned: time, fudge: UInt16(fudge), mac: Array(mac),
            originalID: UInt16(originalID), error: ResponseCode(UInt16(error)), otherData: Array(other))
    }

    /// The bytes the MAC covers (RFC 8945 §4.3): the request's MAC when signing or checking a
    /// response, the message as it is without its TSIG record (with the original ID), then the
    /// TSIG variables.
    public func digestInput(message: [UInt8], requestMAC: [UInt8]?) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(message.count + 128)
        if let requestMAC {
            appendUInt16(UInt16(truncatingIfNeeded: requestMAC.count), to: &bytes)
            bytes += requestMAC
        }
        var body = message
        if body.count >= 2 {
            body[0] = UInt8(originalID >> 8)
            body[1] = UInt8(truncatingIfNeeded: originalID)
        }
        bytes += body
        bytes += keyName.canonicalWire
        appendUInt16(RecordClass.any.rawValue, to: &bytes)
        bytes += [0, 0, 0, 0]  // TTL
        bytes += algorithm.canonicalWire
        appendUInt48(timeSigned, to: &bytes)
        appendUInt16(fudge, to: &bytes)
        appendUInt16(error.rawValue, to: &bytes)
        appendUInt16(UInt16(truncatingIfNeeded: otherData.count), to: &bytes)
        return bytes + otherData
    }

    /// Appends this record to an encoded message, whose additional count goes up by one.
    public func appended(to message: [UInt8]) -> [UInt8] {
        guard var bytes = Self.countingOneMoreAdditional(message) else { return message }
        bytes += keyName.storage + [0]
        appendUInt16(RecordType.tsig.rawValue, to: &bytes)
        appendUInt16(RecordClass.any.rawValue, to: &bytes)
        bytes += [0, 0, 0, 0]
        let data = rdata
        appendUInt16(UInt16(truncatingIfNeeded: data.count), to: &bytes)
        return bytes + data
    }

    /// Splits a received message into the part its TSIG signs (its additional count one less)
    /// and the TSIG record, which must be the last record (RFC 8945 §5.1). Nil when the
    /// message has no TSIG record there.
    /// - Throws: ``DNSWireError`` when the message cannot be read, or its TSIG record is malformed.
    public static func split(_ message: [UInt8]) throws(DNSWireError) -> (unsigned: [UInt8], record: TSIGRecord)? {
        let result = message.withUnsafeBytes { raw in
            Result { () throws(DNSWireError) -> (Int, DomainName, [UInt8])? in
                try WireReader.reading(raw) { (reader) throws(DNSWireError) in try reader.lastRecord(ofType: .tsig) }
            }
        }
        guard let (start, name, rdata) = try result.get() else { return nil }
        guard let record = TSIGRecord(keyName: name, rdata: rdata) else {
            throw DNSWireError(.badRecordData, "the TSIG record of \(name) is malformed", at: start)
        }
        var unsigned = Array(message[..<start])
        let count = UInt16(unsigned[10]) << 8 | UInt16(unsigned[11])
        unsigned[10] = UInt8((count &- 1) >> 8)
        unsigned[11] = UInt8(truncatingIfNeeded: count &- 1)
        return (unsigned, record)
    }
}

private func appendUInt16(_ value: UInt16, to bytes: inout [UInt8]) {
    bytes.append(UInt8(value >> 8))
    bytes.append(UInt8(truncatingIfNeeded: value))
}

private func appendUInt48(_ value: UInt64, to bytes: inout [UInt8]) {
    for shift in stride(from: 40, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(shift))) }
}

extension DomainName {
    /// The canonical wire form (RFC 4034 §6.2): uncompressed, ASCII letters in lower case.
    public var canonicalWire: [UInt8] {
        // Length bytes are at most 63, below "A" (65): lowering every byte in A-Z is safe.
        storage.map { $0 >= 65 && $0 <= 90 ? $0 + 32 : $0 } + [0]
    }

    /// Reads an uncompressed name at `start`; nil when it is malformed or compressed.
    static func readUncompressed(_ bytes: [UInt8], at start: Int) -> (DomainName, Int)? {
        var index = start
        var labels: [[UInt8]] = []
        while index < bytes.count {
            let length = Int(bytes[index])
            if length == 0 {
                guard let name = try? DomainName(labels: labels) else { return nil }
                return (name, index + 1)
            }
            guard length <= 63, index + 1 + length <= bytes.count else { return nil }
            labels.append(Array(bytes[(index + 1)..<(index + 1 + length)]))
            index += 1 + length
        }
        return nil
    }
}

extension WireReader {
    /// When the message's last record has `type`: where it starts, its name and its RDATA.
    mutating func lastRecord(ofType type: RecordType) throws(DNSWireError) -> (Int, DomainName, [UInt8])? {
        let size = count
        guard size >= 12 else {
            throw DNSWireError(.truncated, "packet of \(size) bytes is shorter than the 12-byte DNS header", at: 0)
        }
        let questions = Int(uint16(4))
        let records = Int(uint16(6)) + Int(uint16(8)) + Int(uint16(10))
        guard uint16(10) > 0 else { return nil }
        let needed = 12 + questions * Self.minimumQuestionLength + records * Self.minimumRecordLength
        guard needed <= size else {
            throw DNSWireError(.countExceedsData, "header claims more records than \(size) bytes can hold", at: 4)
        }
        position = 12
        for _ in 0..<questions { _ = try readQuestion() }
        var scratch: [ResourceRecord] = []
        var skipped: [SkippedRecord] = []
        for _ in 0..<(records - 1) {
            try readRecord(into: &scratch, section: .additional, skipped: &skipped)
            scratch.removeAll(keepingCapacity: true)
        }
        let start = position
        let (name, end) = try readName(at: position, limit: count)
        guard end + 10 <= count, RecordType(uint16(end)) == type else { return nil }
        let length = Int(uint16(end + 8))
        guard end + 10 + length <= count else {
            throw DNSWireError(.truncated, "the last record claims \(length) bytes of data that are not there", at: end + 8)
        }
        return (start, name, Array(bytes[(end + 10)..<(end + 10 + length)]))
    }
}

extension TSIGRecord {
    /// `message` with its additional count (ARCOUNT) one higher, for a record appended last
    /// (TSIG, SIG(0)); nil when it is shorter than a header.
    static func countingOneMoreAdditional(_ message: [UInt8]) -> [UInt8]? {
        guard message.count >= 12 else { return nil }
        var bytes = message
        let next = (UInt16(bytes[10]) << 8 | UInt16(bytes[11])) &+ 1
        bytes[10] = UInt8(next >> 8)
        bytes[11] = UInt8(truncatingIfNeeded: next)
        return bytes
    }
}
