// Validates JUnit XML files against an XSD with the JDK's own validator (javax.xml.validation):
//     java ValidateJunit.java SCHEMA.xsd FILE.xml ...
// Exit 0 when every file is valid; otherwise the first error (file, line, column, reason) and exit 1.
import java.io.File;
import javax.xml.XMLConstants;
import javax.xml.transform.stream.StreamSource;
import javax.xml.validation.SchemaFactory;
import javax.xml.validation.Validator;
import org.xml.sax.SAXParseException;

public class ValidateJunit {
    public static void main(String[] args) throws Exception {
        Validator validator = SchemaFactory.newInstance(XMLConstants.W3C_XML_SCHEMA_NS_URI)
                .newSchema(new File(args[0])).newValidator();
        for (int i = 1; i < args.length; i++) {
            try {
                validator.validate(new StreamSource(new File(args[i])));
            } catch (SAXParseException err) {
                System.err.println(args[i] + ":" + err.getLineNumber() + ":" + err.getColumnNumber() + ": "
                        + err.getMessage());
                System.exit(1);
            }
        }
    }
}
