/// Reads packet capture files (classic pcap and pcapng) from bytes and finds the UDP datagrams
/// in them, frame by frame, the way Wireshark numbers and sees them.
///
/// Nothing here does I/O: the caller reads the file and passes its bytes to ``Capture/read(_:)``.
/// Every frame of the file becomes one ``CapturedFrame`` (numbered from 1 in file order, like
/// Wireshark's `frame.number`), whatever it holds: a UDP datagram, an IP fragment held for
/// reassembly, something else (ARP, TCP, an 802.11 beacon...) described in a few words, or a
/// frame that should hold IP but cannot be read, with the reason. Problems that are no single
/// frame's fault (the file ends inside a record, fragments never completed, unknown blocks
/// skipped) are listed in ``Capture/problems``; only a file that cannot be read at all throws.
public struct Capture: Sendable, Equatable {
    /// Classic pcap or pcapng.
    public var format: CaptureFormat
    /// The capture's interfaces. A pcap file has one. A pcapng file has every Interface
    /// Description Block of every section, in file order; ``CapturedFrame/interface`` indexes
    /// this array (pcapng's per-section interface numbers are translated).
    public var interfaces: [CaptureInterface]
    /// Every frame, numbered 1... in file order, exactly as Wireshark numbers them.
    public var frames: [CapturedFrame]
    /// What went wrong that is not one frame's fault, in the order it was found.
    public var problems: [CaptureProblem]

    /// Makes a capture from its parts (for tests and for callers that filter a capture).
    public init(
        format: CaptureFormat, interfaces: [CaptureInterface], frames: [CapturedFrame],
        problems: [CaptureProblem]
    ) {
        self.format = format
        self.interfaces = interfaces
        self.frames = frames
        self.problems = problems
    }

    /// Reads a whole capture file.
    ///
    /// Throws only when nothing can be read: the bytes are not a capture (the error says what
    /// they look like instead, see ``kind(of:)``), the file header is cut short, or the format
    /// version is not one this reader knows. Everything after the header is read as far as it
    /// goes; damage further on ends the reading with a ``CaptureProblem`` and keeps the frames
    /// read so far.
    public static func read(_ bytes: [UInt8]) throws(CaptureError) -> Capture {
        var builder = CaptureBuilder()
        let format: CaptureFormat
        switch kind(of: bytes) {
        case .pcap:
            format = .pcap
            try PcapReader.read(bytes, into: &builder)
        case .pcapng:
            format = .pcapng
            try PcapngReader.read(bytes, into: &builder)
        case let other:
            throw CaptureError(.notACapture(other), CaptureError.notACaptureReason(other), at: 0)
        }
        return builder.finish(format: format)
    }

    /// What a file's first bytes say it is: a capture, a compressed file, text, or unknown.
    ///
    /// Useful for a helpful message when a file is not a capture (`.gz` captures must be
    /// decompressed first). Looks at no more than the first 512 bytes.
    public static func kind(of bytes: [UInt8]) -> FileKind {
        FileKind.detect(bytes)
    }
}

/// The container format of a capture file.
public enum CaptureFormat: Sendable, Equatable, CustomStringConvertible {
    /// Classic libpcap format (`tcpdump -w`), including the nanosecond and the "modified"
    /// (Kuznetzov) variants.
    case pcap
    /// pcapng (`dumpcap`, Wireshark's default).
    case pcapng

    /// "pcap" or "pcapng".
    public var description: String {
        switch self {
        case .pcap: "pcap"
        case .pcapng: "pcapng"
        }
    }
}

/// What a file's first bytes say it is.
public enum FileKind: Sendable, Equatable, CustomStringConvertible {
    /// A classic pcap capture (any of its magic numbers).
    case pcap
    /// A pcapng capture (starts with a Section Header Block).
    case pcapng
    /// gzip-compressed data (`1F 8B`).
    case gzip
    /// bzip2-compressed data (`BZh`).
    case bzip2
    /// xz-compressed data (`FD 37 7A 58 5A 00`).
    case xz
    /// Zstandard-compressed data (`28 B5 2F FD`).
    case zstd
    /// A zip archive (`PK`).
    case zip
    /// Text (UTF-8 without control characters other than tab, line feed, carriage return and
    /// form feed), such as a tshark or tcpdump text dump.
    case text
    /// None of the above (including an empty file).
    case unknown

    /// What the bytes are, in words: "pcap capture", "gzip-compressed data", "text"...
    public var description: String {
        switch self {
        case .pcap: "pcap capture"
        case .pcapng: "pcapng capture"
        case .gzip: "gzip-compressed data"
        case .bzip2: "bzip2-compressed data"
        case .xz: "xz-compressed data"
        case .zstd: "zstd-compressed data"
        case .zip: "a zip archive"
        case .text: "text"
        case .unknown: "unknown data"
        }
    }

    static func detect(_ bytes: [UInt8]) -> FileKind {
        let count = bytes.count
        guard count > 0 else { return .unknown }
        if count >= 4 {
            let b0 = bytes[0], b1 = bytes[1], b2 = bytes[2], b3 = bytes[3]
            if PcapReader.magic(b0, b1, b2, b3) != nil { return .pcap }
            if b0 == 0x0A, b1 == 0x0D, b2 == 0x0D, b3 == 0x0A {
                // "\n\r\r\n" can start a text file too: without the byte-order magic, text wins.
                let magic = count >= 12 && (bytes[8...11].elementsEqual([0x4D, 0x3C, 0x2B, 0x1A])
                    || bytes[8...11].elementsEqual([0x1A, 0x2B, 0x3C, 0x4D]))
                return !magic && count >= 12 && isText(bytes, limit: 512) ? .text : .pcapng
            }
            if b0 == 0x28, b1 == 0xB5, b2 == 0x2F, b3 == 0xFD { return .zstd }
            if b0 == 0x50, b1 == 0x4B,
                (b2 == 0x03 && b3 == 0x04) || (b2 == 0x05 && b3 == 0x06) || (b2 == 0x07 && b3 == 0x08)
            {
                return .zip
            }
        }
        if count >= 2, bytes[0] == 0x1F, bytes[1] == 0x8B { return .gzip }
        if count >= 3, bytes[0] == 0x42, bytes[1] == 0x5A, bytes[2] == 0x68 { return .bzip2 }
        if count >= 6, bytes[0] == 0xFD, bytes[1] == 0x37, bytes[2] == 0x7A, bytes[3] == 0x58,
            bytes[4] == 0x5A, bytes[5] == 0x00
        {
            return .xz
        }
        return isText(bytes, limit: 512) ? .text : .unknown
    }

    /// UTF-8 without control characters (other than tab, LF, CR, FF) in the first `limit`
    /// bytes; a multi-byte sequence cut by the limit is allowed.
    private static func isText(_ bytes: [UInt8], limit: Int) -> Bool {
        let end = min(bytes.count, limit)
        var index = 0
        while index < end {
            let byte = bytes[index]
            if byte < 0x80 {
                if byte < 0x20, byte != 0x09, byte != 0x0A, byte != 0x0D, byte != 0x0C { return false }
                if byte == 0x7F { return false }
                index += 1
                continue
            }
            let length: Int
            switch byte {
            case 0xC2...0xDF: length = 2
            case 0xE0...0xEF: length = 3
            case 0xF0...0xF4: length = 4
            default: return false
            }
            var next = index + 1
            while next < index + length {
                if next >= bytes.count { return false }  // the file itself ends mid-character
                if next >= end { return true }  // cut by the limit: fine
                guard bytes[next] & 0xC0 == 0x80 else { return false }
                next += 1
            }
            index = next
        }
        return true
    }
}

/// A file-level error: the bytes cannot be read as a capture at all.
///
/// The reason says what is wrong and ``offset`` says where (a byte offset in the file).
public struct CaptureError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of error this is.
    public enum Code: Sendable, Equatable {
        /// The bytes are not a pcap or pcapng capture; the associated value says what they
        /// look like instead.
        case notACapture(FileKind)
        /// The file ends inside its file header (pcap) or first Section Header Block (pcapng).
        case truncatedHeader
        /// A pcap major version other than 2, or a pcapng major version other than 1.
        case unsupportedVersion
        /// The first Section Header Block is malformed (impossible length, bad byte-order magic).
        case badHeader
    }

    /// What kind of error this is.
    public var code: Code
    /// Byte offset in the file where the problem was found.
    public var offset: Int
    /// A sentence saying what is wrong.
    public var reason: String

    /// Makes an error.
    public init(_ code: Code, _ reason: String, at offset: Int) {
        self.code = code
        self.reason = reason
        self.offset = offset
    }

    /// The reason with the byte offset, e.g. `the pcap file header is cut short: 24 bytes
    /// needed, 10 present (at byte offset 0)`.
    public var description: String { "\(reason) (at byte offset \(offset))" }

    static func notACaptureReason(_ kind: FileKind) -> String {
        switch kind {
        case .gzip: "not a capture file: it is gzip-compressed data (decompress it first, e.g. with gunzip)"
        case .bzip2: "not a capture file: it is bzip2-compressed data (decompress it first, e.g. with bunzip2)"
        case .xz: "not a capture file: it is xz-compressed data (decompress it first, e.g. with unxz)"
        case .zstd: "not a capture file: it is zstd-compressed data (decompress it first, e.g. with unzstd)"
        case .zip: "not a capture file: it is a zip archive (extract the capture from it first)"
        case .text: "not a capture file: it is text (a capture is binary pcap or pcapng, e.g. from tcpdump -w)"
        case .unknown: "not a capture file: no pcap or pcapng magic number"
        case .pcap, .pcapng: "not a capture file"
        }
    }
}

/// Something wrong with a capture that is not one frame's fault.
///
/// Problems never stop the frames already read from being returned; the ones that end the
/// reading (a damaged block, the file ending inside a record) say so.
public struct CaptureProblem: Sendable, Equatable, CustomStringConvertible {
    /// What kind of problem this is.
    public enum Kind: Sendable, Equatable {
        /// The file ends inside a record or block (``CaptureProblem/frames`` names the frame
        /// that was cut, when it is a packet record), or with stray bytes after the last one.
        case truncated
        /// A pcapng block whose length is impossible or whose trailing length does not match,
        /// a later Section Header Block that cannot be read, or a record length beyond reason:
        /// reading stopped there.
        case badBlock
        /// A pcapng block was accepted only after correcting it (a total length that is not a
        /// multiple of 4, rounded up as Wireshark does), or an option was unusable (an
        /// `if_tsresol` too fine to represent).
        case irregularBlock
        /// pcapng blocks of unknown types were skipped; ``CaptureProblem/count`` says how many.
        case unknownBlocks
        /// IP fragments that never made a whole datagram by the end of the file.
        case fragmentsIncomplete
        /// IP fragments that overlap with different bytes: the whole set was discarded.
        case fragmentsOverlap
        /// IP fragments that would make a datagram larger than 65,535 bytes (or that stored far
        /// more overlapping bytes than one datagram needs): the whole set was discarded.
        case fragmentsTooLarge
        /// More datagrams were being reassembled at once than the reader keeps (64): the oldest
        /// unfinished set was discarded.
        case fragmentsEvicted
    }

    /// What kind of problem this is.
    public var kind: Kind
    /// The frames concerned, ascending (empty when none is).
    public var frames: [Int]
    /// Byte offset in the file where it was found, when that means something.
    public var offset: Int?
    /// How many times it happened (blocks skipped); 1 for most problems.
    public var count: Int
    /// A sentence saying what is wrong.
    public var message: String

    /// Makes a problem.
    public init(_ kind: Kind, _ message: String, frames: [Int] = [], offset: Int? = nil, count: Int = 1) {
        self.kind = kind
        self.message = message
        self.frames = frames
        self.offset = offset
        self.count = count
    }

    /// The message, with the byte offset when there is one.
    public var description: String {
        if let offset { return "\(message) (at byte offset \(offset))" }
        return message
    }
}
