extension QRCode {
    /// The code as a PNG image: black modules on white, 1 bit per pixel, grey scale.
    ///
    /// Written without a compression library: the image data is a zlib stream of stored
    /// (uncompressed) deflate blocks. A version-7 code at the default scale and quiet zone is a
    /// 424×424 image of about 23 KB.
    ///
    /// - Parameters:
    ///   - scale: Pixels per module along each side (less than 1 counts as 1).
    ///   - quietZone: The white margin around the code, in modules (negative counts as 0); the
    ///     standard asks for 4.
    /// - Returns: The bytes of a PNG file.
    public func png(scale: Int = 8, quietZone: Int = 4) -> [UInt8] {
        let scale = max(1, scale)
        let margin = max(0, quietZone)
        let modulesAcross = size + 2 * margin
        let pixelsAcross = modulesAcross * scale
        let bytesPerRow = (pixelsAcross + 7) / 8

        // Each pixel row: filter type 0 (none), then the pixels, 8 to a byte, most significant
        // bit first; 0 is black, 1 white. Every module row is `scale` identical pixel rows.
        var image: [UInt8] = []
        image.reserveCapacity((1 + bytesPerRow) * pixelsAcross)
        for y in -margin..<(size + margin) {
            var row = [UInt8](repeating: 0, count: 1 + bytesPerRow)
            for pixel in 0..<pixelsAcross where !isDark(x: pixel / scale - margin, y: y) {
                row[1 + pixel / 8] |= 0x80 >> UInt8(pixel % 8)
            }
            for _ in 0..<scale { image.append(contentsOf: row) }
        }

        var header: [UInt8] = []
        PNGWriter.appendBigEndian(UInt32(pixelsAcross), to: &header)  // width
        PNGWriter.appendBigEndian(UInt32(pixelsAcross), to: &header)  // height
        header += [1, 0, 0, 0, 0]  // bit depth 1, grey scale, deflate, standard filters, no interlace

        var file: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        PNGWriter.appendChunk("IHDR", header, to: &file)
        PNGWriter.appendChunk("IDAT", PNGWriter.storedZlib(image), to: &file)
        PNGWriter.appendChunk("IEND", [], to: &file)
        return file
    }
}

/// The few pieces of PNG (RFC 2083) and zlib (RFC 1950, 1951) that an uncompressed image needs.
enum PNGWriter {
    /// A chunk: length, type, data, and the CRC-32 of type and data.
    static func appendChunk(_ type: StaticString, _ data: [UInt8], to file: inout [UInt8]) {
        appendBigEndian(UInt32(data.count), to: &file)
        let start = file.count
        type.withUTF8Buffer { file.append(contentsOf: $0) }
        file.append(contentsOf: data)
        appendBigEndian(crc32(file[start...]), to: &file)
    }

    /// A zlib stream holding `data` in stored deflate blocks of at most 65535 bytes each.
    static func storedZlib(_ data: [UInt8]) -> [UInt8] {
        let blockLimit = 65535
        let blocks = max(1, (data.count + blockLimit - 1) / blockLimit)
        var stream: [UInt8] = []
        stream.reserveCapacity(2 + data.count + 5 * blocks + 4)
        // CMF 0x78: deflate with a 32 KB window; FLG 0x01: no dictionary, fastest level, and
        // 0x7801 a multiple of 31 as the check bits require.
        stream += [0x78, 0x01]
        var start = 0
        repeat {
            let end = min(start + blockLimit, data.count)
            let length = UInt16(end - start)
            // The block header: BFINAL on the last block, BTYPE 00 (stored), then the bits up
            // to the byte boundary; LEN and its complement NLEN, least significant byte first.
            stream.append(end == data.count ? 1 : 0)
            stream += [UInt8(length & 0xFF), UInt8(length >> 8), UInt8(~length & 0xFF), UInt8(~length >> 8)]
            stream.append(contentsOf: data[start..<end])
            start = end
        } while start < data.count
        appendBigEndian(adler32(data), to: &stream)
        return stream
    }

    /// The Adler-32 checksum zlib ends its stream with.
    static func adler32(_ data: [UInt8]) -> UInt32 {
        let modulus: UInt32 = 65521
        var a: UInt32 = 1
        var b: UInt32 = 0
        // 5552 bytes is the most that can be summed before b could overflow 32 bits.
        var start = 0
        while start < data.count {
            let end = min(start + 5552, data.count)
            for byte in data[start..<end] {
                a += UInt32(byte)
                b += a
            }
            a %= modulus
            b %= modulus
            start = end
        }
        return b << 16 | a
    }

    /// The CRC-32 (ISO 3309, reflected polynomial 0xEDB88320) of a PNG chunk's type and data.
    static func crc32(_ bytes: ArraySlice<UInt8>) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc = crcTable[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8)
        }
        return ~crc
    }

    private static let crcTable: [UInt32] = (0..<256).map { (index: UInt32) in
        var value = index
        for _ in 0..<8 { value = value & 1 == 1 ? 0xEDB8_8320 ^ (value >> 1) : value >> 1 }
        return value
    }

    static func appendBigEndian(_ value: UInt32, to bytes: inout [UInt8]) {
        bytes += [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
    }
}
