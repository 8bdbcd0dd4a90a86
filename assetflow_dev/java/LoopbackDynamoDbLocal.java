// DynamoDB Local on 127.0.0.1 only. Its jar takes no host option and binds every interface (Jetty's
// Server(port)); this builds the server from the same command line, moves its connectors to the loopback
// address before they open, and starts it. Run in source-file mode: java -cp DynamoDBLocal.jar <this file> ARGS.
import java.lang.reflect.Field;
import org.eclipse.jetty.server.Connector;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import software.amazon.dynamodb.services.local.main.ServerRunner;
import software.amazon.dynamodb.services.local.server.DynamoDBProxyServer;

public class LoopbackDynamoDbLocal {
    public static void main(String[] args) throws Exception {
        String host = System.getProperty("assetflow.host", "127.0.0.1");
        DynamoDBProxyServer proxy = ServerRunner.createServerFromCommandLineArgs(args);
        Field field = DynamoDBProxyServer.class.getDeclaredField("server");
        field.setAccessible(true);
        Server server = (Server) field.get(proxy);
        int moved = 0;
        for (Connector connector : server.getConnectors()) {
            if (connector instanceof ServerConnector) {
                ((ServerConnector) connector).setHost(host);
                moved++;
            }
        }
        if (moved == 0) {
            throw new IllegalStateException("DynamoDB Local has no connector to bind to " + host);
        }
        System.out.println("assetflow: DynamoDB Local bound to " + host);
        proxy.start();
    }
}
